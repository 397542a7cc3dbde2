//! Every command the README and the book beside it (docs/) show runs as written.
//!
//! The ```sh blocks of README.md and of every docs/*.md (by name, after the README) are read
//! line by line. A line that runs dlbench (it contains
//! `cargo run` or `dlbench` as a command word) is run with `sh -c`, from the repository root, as
//! written, with two substitutions: `cargo run --release --` becomes the binary this test
//! was built with (cargo already built it; a nested cargo would wait on the build lock),
//! and `dlbench` resolves to that binary (its directory leads PATH); `cargo build --release
//! && ` is dropped for the same reason. DLBENCH_TIME_SCALE=0.1
//! shortens the runs after dlbench has validated them as written (src/timescale.rs), so an
//! example refused as written is refused here too. Each line must exit 0 (see `# exit:`).
//!
//! A comment line `# needs: WHAT` marks the rest of its block:
//! - `# needs: docker`: run by `docker_blocks_run_as_written` when a Docker engine and
//!   docker compose (or docker-compose, substituted) answer, every line of the block in order
//!   (the docker commands set up what the dlbench lines use), under compose project
//!   `dlbenchreadme`; otherwise it says SKIPPED.
//! - `# needs: dlbench up --endpoints FILE`: the test starts that, waits for FILE, runs the
//!   lines, then stops it (a remark in parentheses after FILE is ignored).
//! Any other `needs:` is listed as skipped. `# exit: 0 1` (rest of the block) names the exit
//! statuses a line may end with, for an example whose verdict may find a violation (exit 1). Lines that run no dlbench (`cargo test`, `sh
//! scripts/setup.sh` alone) are not run here (`scripts/setup.sh` runs as part of a line that
//! also runs dlbench).
//!
//! Failures name the file and line (`docs/faults.md:5`). A `dlbench up` started for a
//! `needs:` stops at the end of its file at the latest.
//!
//! README_TEST_FILE names another file to read instead of README.md and docs/*.md (to show
//! the test failing on a broken example without editing the documents).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PROJECT: &str = "dlbenchreadme";

#[derive(Debug, Clone, PartialEq)]
struct Line {
    /// The document, relative to the repository (`README.md`, `docs/faults.md`); empty from
    /// `commands` alone.
    doc: String,
    /// 1-based line number in the document.
    at: usize,
    text: String,
    /// The `# needs:` in force, if any.
    needs: Option<String>,
    /// The block's first line number (lines of one block run together).
    block: usize,
    /// Exit statuses the document says this line may end with (`# exit: 0 1`); default 0.
    exits: Vec<i32>,
}

/// Whether a shell line runs dlbench: `cargo run`, or `dlbench` as a command word anywhere
/// in it (`dlbench run`, `x && dlbench run`, `for i in 1 2; do dlbench run ...; done`).
fn runs_dlbench(l: &str) -> bool {
    l.contains("cargo run") || l.split(|c: char| c.is_whitespace() || ";&|()".contains(c)).any(|w| w == "dlbench")
}

/// Every command line of the ```sh blocks, with the marker in force.
fn commands(readme: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut block: Option<usize> = None;
    let mut needs = None;
    let mut exits = vec![0];
    for (i, raw) in readme.lines().enumerate() {
        let l = raw.trim();
        if l.starts_with("```") {
            block = match block {
                None if matches!(l.trim_start_matches('`'), "sh" | "bash" | "shell") => Some(i + 1),
                None => Some(0),
                Some(_) => None,
            };
            needs = None;
            exits = vec![0];
            continue;
        }
        let Some(b) = block.filter(|&b| b > 0) else { continue };
        if let Some(n) = l.strip_prefix("# needs:") {
            needs = Some(n.trim().to_string());
            continue;
        }
        if let Some(e) = l.strip_prefix("# exit:") {
            exits = e.split([' ', ',']).filter_map(|c| c.trim().parse().ok()).collect();
            continue;
        }
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        out.push(Line { doc: String::new(), at: i + 1, text: l.to_string(), needs: needs.clone(), block: b, exits: exits.clone() });
    }
    out
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, then docs/*.md sorted by name: (path relative to the repository, text). With
/// README_TEST_FILE set, that file alone.
fn documents() -> Vec<(String, String)> {
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    if let Some(p) = std::env::var_os("README_TEST_FILE").map(PathBuf::from) {
        return vec![(p.display().to_string(), read(&p))];
    }
    let docs = repo().join("docs");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&docs)
        .unwrap_or_else(|e| panic!("{}: {e}", docs.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    paths.sort();
    std::iter::once(repo().join("README.md"))
        .chain(paths)
        .map(|p| (p.strip_prefix(repo()).unwrap_or(&p).display().to_string(), read(&p)))
        .collect()
}

/// Every command line of every document, in document order, each naming its document.
fn all_commands() -> Vec<Line> {
    documents()
        .into_iter()
        .flat_map(|(doc, md)| commands(&md).into_iter().map(move |l| Line { doc: doc.clone(), ..l }))
        .collect()
}

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_dlbench"))
}

/// The line as the test runs it.
fn rewrite(l: &str, compose_plugin: bool) -> String {
    let mut s = l.replace("cargo build --release && ", "").replace("cargo run --release --", "dlbench");
    if !compose_plugin {
        s = s.replace("docker compose", "docker-compose");
    }
    s
}

fn shell(line: &Line, compose_plugin: bool) -> Command {
    let path = format!("{}:{}", bin().parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(rewrite(&line.text, compose_plugin))
        .current_dir(repo())
        .env("PATH", path)
        .env("DLBENCH_TIME_SCALE", "0.1")
        .env("DLBENCH_STRICT_VERDICTS", "1")
        .env("COMPOSE_PROJECT_NAME", PROJECT)
        .env_remove("DLBENCH_LOG")
        .stdin(Stdio::null());
    c
}

/// Run one line; its failure, as one message naming the document and line.
fn run_line(line: &Line, compose_plugin: bool) -> Result<(), String> {
    let started = Instant::now();
    eprintln!("{}:{}: {}", line.doc, line.at, line.text);
    let out = shell(line, compose_plugin).output().map_err(|e| format!("{}:{}: cannot run sh: {e}", line.doc, line.at))?;
    eprintln!("  -> {} in {:.1} s", out.status, started.elapsed().as_secs_f64());
    if out.status.code().is_some_and(|c| line.exits.contains(&c)) {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = err.lines().rev().take(6).collect::<Vec<_>>().into_iter().rev().collect();
    // The verdict's table is on stdout: its tail says which backend made the exit status.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let told: Vec<&str> = stdout.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect();
    Err(format!(
        "{}:{}: `{}` exited {}:\n    {}\n  stdout's tail:\n    {}",
        line.doc,
        line.at,
        line.text,
        out.status,
        tail.join("\n    "),
        told.join("\n    ")
    ))
}

/// `# needs: dlbench up --endpoints FILE`: start it, wait for FILE; stopped on drop.
struct Up(std::process::Child, PathBuf);

impl Drop for Up {
    fn drop(&mut self) {
        common::sigint(&self.0);
        common::wait_exit(&mut self.0, Duration::from_secs(60));
        let _ = std::fs::remove_file(&self.1);
    }
}

fn start_up(needs: &str) -> Up {
    // `dlbench up --endpoints FILE (a remark)`: the command is what precedes the remark.
    let cmd = needs.split(" (").next().unwrap_or(needs);
    let args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
    let file = args.iter().position(|a| *a == "--endpoints").and_then(|i| args.get(i + 1)).expect("`needs: dlbench up --endpoints FILE`");
    let path = repo().join(file);
    let _ = std::fs::remove_file(&path);
    let child = Command::new(bin()).args(&args).current_dir(repo()).stdout(Stdio::null()).stderr(Stdio::inherit()).spawn().unwrap();
    let up = Up(child, path.clone());
    let t = Instant::now();
    while !path.exists() {
        assert!(t.elapsed() < Duration::from_secs(120), "`{needs}` wrote no {} within 120 s", path.display());
        std::thread::sleep(Duration::from_millis(200));
    }
    up
}

#[test]
fn parser_finds_commands_and_markers() {
    let md = "text\n```sh\n# a comment\ncargo run --release -- run\n```\n```toml\ndlbench = 1\n```\n```sh\n# needs: docker\ndocker compose up -d\ndlbench run --target compose\n```\n";
    let c = commands(md);
    assert_eq!(c.len(), 3, "{c:?}");
    assert_eq!((c[0].at, c[0].needs.as_deref()), (4, None));
    assert_eq!((c[1].at, c[1].needs.as_deref(), c[1].block), (11, Some("docker"), 9));
    assert!(runs_dlbench(&c[2].text) && !runs_dlbench(&c[1].text));
    assert!(runs_dlbench("d=$(mktemp -d); for i in 1 2; do dlbench run --out $d/$i; done"));
    assert!(!runs_dlbench("ls results/dlbench-1 && cargo test --release"));
    assert_eq!(rewrite("docker compose run --rm bench run", false), "docker-compose run --rm bench run");
    assert_eq!(rewrite("cargo run --release -- run --target compose", true), "dlbench run --target compose");
    // The documents have commands to run, so the tests below check something.
    assert!(all_commands().iter().filter(|l| runs_dlbench(&l.text)).count() >= 5);
}

/// Every dlbench line outside `# needs: docker` blocks.
/// The documents `host_commands_of_the_second_half_run_as_written` runs; the first test runs
/// the rest (README.md, and any new document). Two halves of about the same time (about 150 s
/// each here, run on the two heavy permits side by side instead of 300 s in a row). Documents
/// whose lines share a `dlbench up --endpoints FILE` stay in one half (they write the same
/// file): `halves_keep_a_shared_endpoints_file_together` checks it.
const SECOND_HALF: &[&str] = &["docs/cost-and-scaling.md", "docs/performance.md", "docs/results-and-compare.md", "docs/scenarios.md"];

#[test]
fn host_commands_run_as_written() {
    let ran = host_commands(false);
    assert!(ran >= 3, "only {ran} README and docs/ commands ran");
}

#[test]
fn host_commands_of_the_second_half_run_as_written() {
    if std::env::var_os("README_TEST_FILE").is_some() {
        eprintln!("SKIPPED second half: README_TEST_FILE names one file, run by host_commands_run_as_written");
        return;
    }
    let ran = host_commands(true);
    assert!(ran >= SECOND_HALF.len(), "only {ran} commands of {SECOND_HALF:?} ran");
}

#[test]
fn halves_keep_a_shared_endpoints_file_together() {
    let docs: Vec<String> = documents().into_iter().map(|(d, _)| d).collect();
    for d in SECOND_HALF {
        assert!(docs.iter().any(|x| x == d), "{d} is in SECOND_HALF but is not a document");
    }
    let mut half_of: std::collections::BTreeMap<String, (bool, String)> = Default::default();
    for l in all_commands() {
        let Some(n) = l.needs.as_deref().filter(|n| n.starts_with("dlbench up ")) else { continue };
        let file = n.split_whitespace().skip_while(|w| *w != "--endpoints").nth(1).unwrap_or_default().to_string();
        let half = SECOND_HALF.contains(&l.doc.as_str());
        let (h, by) = half_of.entry(file.clone()).or_insert((half, l.doc.clone()));
        assert_eq!(*h, half, "{} and {by} both start `dlbench up --endpoints {file}` but run in different halves", l.doc);
    }
}

/// The dlbench lines of one half of the documents, in order; how many ran. Every failure is
/// collected and the test fails naming each.
fn host_commands(second: bool) -> usize {
    let _g = common::heavy();
    let lines: Vec<Line> = all_commands().into_iter().filter(|l| SECOND_HALF.contains(&l.doc.as_str()) == second).collect();
    let mut failures = Vec::new();
    let mut ran = 0;
    // (document, needs): a `dlbench up` serves the lines of one document.
    let mut up: Option<((String, String), Up)> = None;
    for l in lines.iter().filter(|l| runs_dlbench(&l.text)) {
        if up.as_ref().is_some_and(|((doc, _), _)| *doc != l.doc) {
            drop(up.take()); // a new document: the previous one's `dlbench up` stops
        }
        match l.needs.as_deref() {
            None => {}
            Some(n) if n.starts_with("dlbench up ") => {
                if up.as_ref().map(|((_, k), _)| k.as_str()) != Some(n) {
                    drop(up.take()); // the previous `dlbench up` stops before the next starts
                    up = Some(((l.doc.clone(), n.to_string()), start_up(n)));
                }
            }
            Some(n) if n.starts_with("docker") => continue,
            Some(n) => {
                eprintln!("SKIPPED {}:{}: needs {n}", l.doc, l.at);
                continue;
            }
        }
        ran += 1;
        if let Err(e) = run_line(l, false) {
            failures.push(e);
        }
    }
    drop(up);
    assert!(failures.is_empty(), "{} of {ran} README and docs/ commands failed:\n{}", failures.len(), failures.join("\n"));
    ran
}

fn ok(prog: &str, args: &[&str]) -> bool {
    Command::new(prog).args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// Brings the project down however the test ends.
struct Down(bool);

impl Drop for Down {
    fn drop(&mut self) {
        let (p, a): (&str, &[&str]) = if self.0 { ("docker", &["compose"]) } else { ("docker-compose", &[]) };
        let _ = Command::new(p).args(a).args(["-p", PROJECT, "down", "-v", "--remove-orphans"]).current_dir(repo()).status();
    }
}

/// The `# needs: docker` blocks of every document, every line in document order.
#[test]
fn docker_blocks_run_as_written() {
    if !ok("docker", &["info", "--format", "{{.ServerVersion}}"]) {
        eprintln!("SKIPPED README docker blocks: no Docker engine answers");
        return;
    }
    let plugin = ok("docker", &["compose", "version"]);
    if !plugin && !ok("docker-compose", &["version"]) {
        eprintln!("SKIPPED README docker blocks: neither `docker compose` nor `docker-compose` is installed");
        return;
    }
    let _docker = common::docker();
    let _g = common::heavy();
    let lines: Vec<Line> = all_commands().into_iter().filter(|l| l.needs.as_deref() == Some("docker")).collect();
    assert!(lines.iter().any(|l| runs_dlbench(&l.text) || l.text.contains("run --rm bench")), "no docker block runs dlbench: {lines:?}");
    let _down = Down(plugin);
    for l in &lines {
        // A failure stops the sequence: later lines build on earlier ones.
        if let Err(e) = run_line(l, plugin) {
            panic!("{e}");
        }
    }
}
