//! Statistics over small samples, one figure per run: the median, the Mann-Whitney U test
//! (exact for small samples), the smallest p-value a sample size can reach, and Holm's
//! adjustment over a family of tests. `compare` decides with these.

/// The median (0 for no values).
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// The Mann-Whitney U test of `a` against `b`, where U counts the pairs with the `a` value
/// above the `b` value (ties half): `(P(U <= u), P(U >= u))`, the two one-sided p-values.
/// Exact (the count of orderings by U) up to 400 pairs, the normal approximation beyond.
pub fn mann_whitney_tails(a: &[f64], b: &[f64]) -> (f64, f64) {
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 {
        return (1.0, 1.0);
    }
    let mut u2 = 0u64; // twice U, so ties (half a point) stay integers
    for x in a {
        for y in b {
            u2 += if x > y { 2 } else if x == y { 1 } else { 0 };
        }
    }
    let mn = (m * n) as u64;
    if m * n > 400 {
        let u = u2 as f64 / 2.0;
        let mu = mn as f64 / 2.0;
        let sd = ((m * n * (m + n + 1)) as f64 / 12.0).sqrt();
        // Continuity-corrected: P(U <= u) and P(U >= u).
        let le = phi((u - mu + 0.5) / sd);
        let ge = 1.0 - phi((u - mu - 0.5) / sd);
        return (le.min(1.0), ge.min(1.0));
    }
    // f[i][j][u]: orderings of i a's and j b's with U = u.
    let max = mn as usize;
    let mut f = vec![vec![vec![0f64; max + 1]; n + 1]; m + 1];
    for i in 0..=m {
        for j in 0..=n {
            if i == 0 || j == 0 {
                f[i][j][0] = 1.0;
                continue;
            }
            for u in 0..=(i * j) {
                // The largest value is an a (beating all j b's) or a b.
                let from_a = if u >= j { f[i - 1][j][u - j] } else { 0.0 };
                let from_b = f[i][j - 1][u];
                f[i][j][u] = from_a + from_b;
            }
        }
    }
    let total: f64 = f[m][n].iter().sum();
    let lo = (u2 / 2) as usize; // P(U <= floor(u))
    let hi = u2.div_ceil(2) as usize; // P(U >= ceil(u))
    let p_le: f64 = f[m][n][..=lo].iter().sum::<f64>() / total;
    let p_ge: f64 = f[m][n][hi..].iter().sum::<f64>() / total;
    (p_le.min(1.0), p_ge.min(1.0))
}

/// Two-sided p-value of the Mann-Whitney U test of `a` against `b`.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (le, ge) = mann_whitney_tails(a, b);
    (2.0 * le.min(ge)).min(1.0)
}

/// The smallest one-sided p-value an exact Mann-Whitney test can reach with `m` against `n`
/// samples (complete separation): one ordering in C(m + n, m).
pub fn smallest_p(m: usize, n: usize) -> f64 {
    let mut c = 1f64;
    for i in 0..m.min(n) {
        c = c * (m + n - i) as f64 / (i + 1) as f64;
    }
    1.0 / c
}

/// Holm's step-down adjustment of `ps` (family-wise error at most the level used on the
/// result): the i-th smallest p is multiplied by (m - i), and the adjusted values are made
/// monotone. Returned in the input's order.
pub fn holm(ps: &[f64]) -> Vec<f64> {
    let m = ps.len();
    let mut idx: Vec<usize> = (0..m).collect();
    idx.sort_by(|&a, &b| ps[a].total_cmp(&ps[b]));
    let mut out = vec![1.0; m];
    let mut running = 0f64;
    for (rank, &i) in idx.iter().enumerate() {
        running = running.max(((m - rank) as f64 * ps[i]).min(1.0));
        out[i] = running;
    }
    out
}

/// The standard normal CDF (Abramowitz and Stegun 7.1.26).
fn phi(z: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.3275911 * z.abs() / std::f64::consts::SQRT_2);
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * (-(z * z) / 2.0).exp();
    if z >= 0.0 { 0.5 * (1.0 + y) } else { 0.5 * (1.0 - y) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mann_whitney_matches_the_tables() {
        // Completely separated 5 vs 5: the exact two-sided p is 2/252.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert!((p - 2.0 / 252.0).abs() < 1e-9, "{p}");
        // Interleaved: no evidence.
        let p = mann_whitney_p(&[1.0, 3.0, 5.0, 7.0, 9.0], &[2.0, 4.0, 6.0, 8.0, 10.0]);
        assert!(p > 0.5, "{p}");
        // 3 vs 3 separated: 2/20.
        let p = mann_whitney_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
        assert!((p - 0.1).abs() < 1e-9, "{p}");
    }


    #[test]
    fn holm_adjusts_step_down_and_stays_monotone() {
        let a = holm(&[0.01, 0.04, 0.03]);
        let want = [0.03, 0.06, 0.06];
        for (x, y) in a.iter().zip(want) {
            assert!((x - y).abs() < 1e-12, "{a:?}");
        }
        assert!((smallest_p(5, 5) - 1.0 / 252.0).abs() < 1e-12);
    }
}
