//! Build the clock shim (clockshim/clockshim.c) into a shared object that the binary
//! carries and writes out when a scenario needs a server with a moved wall clock. Without
//! a C compiler the shim is empty and clock faults report that they are unavailable.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=clockshim/clockshim.c");
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
