//! Build the clock shim (clockshim/clockshim.c) into a shared object that the binary
//! carries and writes out when a scenario needs a server with a moved wall clock. Without
//! a C compiler the shim is empty and clock faults report that they are unavailable.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=clockshim/clockshim.c");
    git_commit();
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("libdlbench_clockshim.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let ok = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-o"])
        .arg(&out)
        .arg("clockshim/clockshim.c")
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        println!("cargo:warning=no C compiler ({cc}): clock faults will be unavailable");
        std::fs::write(&out, b"").unwrap();
    }
}

/// Record the commit being built, so every result set (and `dlbench -V`) can say which
/// dlbench measured it. Outside a git checkout (a source tarball) nothing is recorded and
/// the binary says "unknown".
fn git_commit() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(head) = git(&["rev-parse", "HEAD"]) else { return };
    // Rebuild when HEAD moves. In a worktree `.git` is a file: ask git where HEAD, the
    // index and the branch's ref really are (the ref lives in the common directory).
    for p in ["HEAD", "index"] {
        if let Some(path) = git(&["rev-parse", "--git-path", p]) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    if let Some(rf) = git(&["symbolic-ref", "-q", "HEAD"]) {
        for p in [rf.as_str(), "packed-refs"] {
            if let Some(path) = git(&["rev-parse", "--git-path", p]) {
                if std::path::Path::new(&path).exists() {
                    println!("cargo:rerun-if-changed={path}");
                }
            }
        }
    }
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    println!("cargo:rustc-env=DLBENCH_GIT_COMMIT={head}{}", if dirty { "-dirty" } else { "" });
}
