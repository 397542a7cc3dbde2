//! Write a synthetic, valid history of N operations, to see how `dlbench check` scales:
//!
//!     cargo run --release --example synthetic_history -- 20000000 0.3 /tmp/h.jsonl
//!     /usr/bin/time -v target/release/dlbench check /tmp/h.jsonl
//!
//! Arguments: operations (default 1000000), share of unknown-outcome acquires (default 0),
//! output path (default history.jsonl).
fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let operations = args.next().map(|s| s.parse().expect("operations: a whole number")).unwrap_or(1_000_000);
    let unknown_share = args.next().map(|s| s.parse().expect("unknown share: a number in 0..1")).unwrap_or(0.0);
    let path = std::path::PathBuf::from(args.next().unwrap_or_else(|| "history.jsonl".into()));
    let spec = dlbench::synthetic::Spec { operations, unknown_share, ..Default::default() };
    let w = dlbench::synthetic::write(&spec, &path)?;
    println!("{}: {} operations, {} sections, {} unknown", path.display(), w.operations, w.sections, w.unknown);
    Ok(())
}
