//! Small helpers shared across the harness.

use std::path::Path;

/// Accept `host:port` with a numeric port.
pub fn check_host_port(s: &str) -> Result<(), String> {
    match s.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => Ok(()),
        _ => Err(format!("{s:?} is not host:port")),
    }
}

/// The `pre_exec` hook every child dlbench starts gets: the kernel kills the child
/// (SIGKILL) when the thread that forked it dies, so a dlbench killed without cleaning up
/// leaves nothing running; a child whose parent died before the hook ran exits at once.
/// Only async-signal-safe calls (prctl, getppid, _exit) run between fork and exec. std runs
/// the hook after setuid, which would otherwise clear the death signal.
pub fn die_with_parent() -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    let parent = std::process::id() as libc::pid_t;
    move || {
        // SAFETY: async-signal-safe calls only (see above).
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
        }
        Ok(())
    }
}

/// Write `contents` to `path` atomically: a temporary file in the same directory, then a
/// rename, so a reader (or a crash) never sees half a file.
pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    std::fs::write(&tmp, contents)?;
    std::fs::rename(&tmp, path)
}

/// Parse durations written like `250ms`, `10s`, `2m`, `1.5s`.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a duration (write e.g. 250ms, 10s, 2m)"))?;
    let secs = match unit.trim() {
        "ns" => n / 1e9,
        "us" | "µs" => n / 1e6,
        "ms" => n / 1e3,
        "s" | "" if n == 0.0 => 0.0,
        "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?} is not a duration (write e.g. 250ms, 10s, 2m)")),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("{s:?} is not a duration"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// Print a duration the way the flags take it.
pub fn fmt_duration(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 == 0 && ms > 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("10").is_err(), "a bare number other than 0 is ambiguous");
        assert!(parse_duration("fast").is_err());
    }
}

/// The width every terminal table and the lines under it keep within.
pub const WIDTH: usize = 100;

/// The columns of the terminal stdout writes to; None when it is not a terminal.
pub fn terminal_columns() -> Option<usize> {
    use std::io::IsTerminal as _;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct it is given, which lives here.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col > 0).then_some(ws.ws_col as usize)
}

/// `text` wrapped at spaces to lines of at most `width` characters: the first line indented
/// by `first`, the rest by `rest` spaces; each line ends in a newline. A word longer than a
/// line stands alone on its line.
pub fn wrap(text: &str, width: usize, first: usize, rest: usize) -> String {
    let mut out = String::new();
    let mut line = " ".repeat(first);
    let mut empty = true;
    for word in text.split_whitespace() {
        let n = line.chars().count();
        if !empty && n + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(rest);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
    out
}
