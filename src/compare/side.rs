//! One side of a comparison, read from disk: a result set, or a directory of them pooled.

use std::path::Path;

use super::comparable::mismatches;
use crate::summary::medium::TargetCosts;
use crate::summary::Summary;

/// One side of a comparison: a result set (a run directory or its summary.json), or a
/// directory of result sets (an `--out` root; `latest` is not counted twice), whose runs
/// are pooled as repeats. The runs of a side must themselves be comparable.
pub fn load_side(p: &Path) -> anyhow::Result<Summary> {
    if !p.is_dir() || p.join("summary.json").exists() {
        return load(p);
    }
    let mut dirs: Vec<std::path::PathBuf> = std::fs::read_dir(p)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name() != "latest" && e.path().join("summary.json").is_file())
        .map(|e| e.path())
        .collect();
    dirs.sort();
    anyhow::ensure!(!dirs.is_empty(), "{} holds no result set (no summary.json in it or in its subdirectories)", p.display());
    let mut runs = dirs.iter().map(|d| load(d)).collect::<anyhow::Result<Vec<_>>>()?;
    // Each run measured its target's costs before its phases; pooled, each figure is the
    // median over the runs (one run's burst in a busy moment does not decide the note).
    let costs: Vec<_> = runs.iter().filter_map(|r| r.target_costs.clone()).collect();
    let costs = if costs.len() == runs.len() { TargetCosts::pooled(&costs.iter().collect::<Vec<_>>()) } else { None };
    let mut pooled = runs.remove(0);
    pooled.target_costs = costs.or(pooled.target_costs);
    let n = runs.len() + 1;
    for r in runs {
        let mut m = mismatches(&pooled, &r);
        if let (Some(a), Some(b)) = (&pooled.dlbench_commit, &r.dlbench_commit) {
            if a != b {
                m.push(format!("build ({} vs {})", &a[..a.len().min(12)], &b[..b.len().min(12)]));
            }
        }
        anyhow::ensure!(m.is_empty(), "the runs in {} cannot be pooled: {} differs from {} in {}", p.display(), r.run_id, pooled.run_id, m.join(", "));
        for b in r.backends {
            match pooled.backends.iter_mut().find(|x| x.name == b.name) {
                Some(x) if x.failure.is_none() && b.failure.is_none() => x.workloads.extend(b.workloads),
                Some(x) => anyhow::bail!("the runs in {} cannot be pooled: {} failed in {}", p.display(), x.name, r.run_id),
                None => pooled.backends.push(b),
            }
        }
    }
    if n > 1 {
        pooled.run_id = format!("{} ({n} runs pooled)", p.display());
    }
    Ok(pooled)
}

/// A run directory or a summary.json.
pub fn load(p: &Path) -> anyhow::Result<Summary> {
    let file = if p.is_dir() { p.join("summary.json") } else { p.to_path_buf() };
    let bytes = std::fs::read(&file).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| anyhow::anyhow!("{} is not a dlbench summary: {e}", file.display()))
}
