//! `--target external`: the endpoints file `dlbench up` writes, read back as a user's own
//! cluster. Passwords travel by environment variable and never reach output or results;
//! wrong passwords and unreachable endpoints end in a clear error, not a hang.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::{dlbench, processes_under, scratch, sigint, wait_exit};

const VAR: &str = "DLBENCH_TEST_PASSWORD";
const SECRET: &str = "s3cret-for-the-external-test";

/// Every file under `dir`, searched for `needle`.
fn files_containing(dir: &std::path::Path, needle: &str) -> Vec<std::path::PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else if std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes())) {
                hits.push(p);
            }
        }
    }
    hits
}

#[test]
fn external_target_with_passwords_from_the_environment() {
    let _g = common::heavy();
    let dir = scratch("external");
    let (mut up, ep) = common::up(&dir, &["--password-env", VAR], &[(VAR, SECRET)]);
    let file = std::fs::read_to_string(&ep).unwrap();
    assert!(file.contains(&format!("password_env = \"{VAR}\"")), "the file names the variable:\n{file}");
    assert!(!file.contains(SECRET), "the endpoints file holds the password itself");

    // The right password: the same table as a local run, for every design (the five
    // families' recipes and the designs on their servers, each reading its family's section).
    let results = dir.join("results");
    let run = |password: &str| {
        dlbench()
            .args(["run", "--target", "external", "--backends", "all", "--endpoints"])
            .arg(&ep)
            .args(["--duration", "2s", "--warmup", "0s", "--out"])
            .arg(&results)
            .env(VAR, password)
            .output()
            .unwrap()
    };
    let out = run(SECRET);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "external run failed (exit {:?}): {stderr}\n{stdout}", out.status.code());
    const DESIGNS: [&str; 12] = ["postgres", "pg-advisory", "pg-advisory-xact", "mariadb", "mariadb-get-lock", "redis", "redisson", "redlock", "zookeeper", "etcd", "etcd-v3lock", "nats"];
    for b in DESIGNS {
        assert!(stdout.lines().any(|l| l.split_whitespace().next() == Some(b)), "{b} missing from the table:\n{stdout}");
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results.join("latest").join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["complete"], true);
    let names: Vec<&str> = summary["backends"].as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap()).collect();
    assert_eq!(names, DESIGNS, "every design ran, grouped by family");
    for b in summary["backends"].as_array().unwrap() {
        for w in b["workloads"].as_array().unwrap() {
            assert!(w["acquired"].as_u64().unwrap() > 0, "{} {} acquired nothing", b["name"], w["name"]);
        }
    }
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET), "the password reached the output");
    let leaked = files_containing(&results, SECRET);
    assert!(leaked.is_empty(), "the password reached result files: {leaked:?}");

    // A wrong password: a clear error that names the backend and not the secret.
    let wrong = "not-the-password-7731";
    let out = run(wrong);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a wrong password must fail the run");
    assert!(stderr.contains("error"), "no error printed: {stderr}");
    assert!(!stderr.contains(wrong) && !String::from_utf8_lossy(&out.stdout).contains(wrong), "the wrong password was echoed");

    sigint(&up);
    let status = wait_exit(&mut up, Duration::from_secs(60));
    assert!(status.success(), "dlbench up after Ctrl-C: {status}");
    assert!(processes_under(&dir).is_empty(), "left behind: {:?}", processes_under(&dir));
}

/// Endpoints that accept TCP connections and never answer: every backend gives up within
/// `--connect-timeout` (plus slack for the process itself) with a one-line error.
#[test]
fn unreachable_endpoints_fail_within_the_connect_timeout() {
    let dir = scratch("unreachable");
    for backend in ["postgres", "redis", "zookeeper", "etcd"] {
        // A listener nobody accepts on: the kernel completes the handshake, then silence.
        // One per backend, so no backlog fills up from the runs before.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = silent.local_addr().unwrap();
        let ep = dir.join(format!("{backend}.toml"));
        std::fs::write(&ep, format!("[{backend}]\nendpoints = [\"{addr}\"]\n")).unwrap();
        let mut child = dlbench()
            .args(["run", "--target", "external", "--backends", backend, "--connect-timeout", "2s", "--duration", "2s", "--endpoints"])
            .arg(&ep)
            .arg("--out")
            .arg(dir.join("results"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A hang guard, not a timing test: a bounded timeout ends well inside a minute.
        let status = wait_exit(&mut child, Duration::from_secs(60));
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert!(!status.success(), "{backend}: a silent endpoint must fail the run: {err}");
        assert!(err.contains(&addr.to_string()) || err.contains("timed out") || err.contains("timeout"), "{backend}: unclear error: {err}");
    }
}

/// `--connect-timeout` is the bound, not a fixed one inside a probe: a Redis endpoint that
/// accepts connections and never says a word keeps dlbench waiting the full 10 s it was
/// given (the version probe used to give up after its own 2 s), then ends the run with one
/// line naming the endpoint and the bound.
#[test]
fn a_silent_endpoint_is_waited_for_the_whole_connect_timeout() {
    let dir = scratch("silent10");
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    // Accept every connection and hold it open, silent, until the test ends.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in silent.incoming().flatten() {
            held.push(s);
        }
    });
    let ep = dir.join("redis.toml");
    std::fs::write(&ep, format!("[redis]\nendpoints = [\"{addr}\"]\n")).unwrap();
    let started = std::time::Instant::now();
    let mut child = dlbench()
        .args(["run", "--target", "external", "--backends", "redis", "--connect-timeout", "10s", "--duration", "2s", "--endpoints"])
        .arg(&ep)
        .arg("--out")
        .arg(dir.join("results"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(60));
    let elapsed = started.elapsed();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    eprintln!("silent endpoint: exit {status} after {elapsed:?}");
    assert_eq!(status.code(), Some(2), "a silent endpoint is bad input (exit 2): {err}");
    assert!(elapsed >= Duration::from_secs(9), "gave up after {elapsed:?}, before the 10s --connect-timeout: {err}");
    assert!(elapsed < Duration::from_secs(30), "waited {elapsed:?}, far past the 10s --connect-timeout: {err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "expected one error line: {err}");
    assert!(errors[0].contains(&addr.to_string()) && errors[0].contains("10s"), "the error names neither the endpoint nor the bound: {err}");
}
