//! What a result set says about where it was measured: the machine and the dlbench build.

use serde::{Deserialize, Serialize};

/// The machine a run ran on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Machine {
    pub hostname: String,
    pub cores: usize,
    pub cpu_model: String,
    pub memory_mb: u64,
    pub kernel: String,
    pub os: String,
}

/// The git commit dlbench was built from (`-dirty` when the tree had changes), if known.
pub fn commit() -> Option<String> {
    option_env!("DLBENCH_GIT_COMMIT").filter(|c| !c.is_empty()).map(str::to_string)
}

pub fn machine() -> Machine {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let meminfo = read("/proc/meminfo");
    let os = read("/etc/os-release");
    let field = |text: &str, key: &str| {
        text.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim_start_matches([' ', '\t', ':', '=']).trim().trim_matches('"').to_string())
    };
    // SAFETY: uname fills a struct we own.
    let (kernel, hostname) = unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) == 0 {
            let s = |f: &[libc::c_char]| std::ffi::CStr::from_ptr(f.as_ptr()).to_string_lossy().to_string();
            (format!("{} {}", s(&u.sysname), s(&u.release)), s(&u.nodename))
        } else {
            (String::new(), String::new())
        }
    };
    Machine {
        hostname,
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        cpu_model: field(&cpuinfo, "model name").unwrap_or_default(),
        memory_mb: field(&meminfo, "MemTotal")
            .and_then(|v| v.trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb / 1024)
            .unwrap_or(0),
        kernel,
        os: field(&os, "PRETTY_NAME").unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn machine_facts_are_read() {
        let m = super::machine();
        assert!(m.cores >= 1);
        assert!(m.memory_mb > 0);
        assert!(m.kernel.starts_with("Linux"), "{}", m.kernel);
    }
}
