//! What of the plan changes what is measured: every field of [`RunPlan`] and of each phase's
//! [`Workload`] is either compared by `compare` (from a summary field it already reads, or
//! from the plan settings the run records in summary.json, [`RunPlan::settings`]) or marked,
//! with a reason, as not affecting the figures. A new field that is neither fails to compile
//! here (the destructuring below names every field) and fails the audit test (its JSON name
//! is in no table).

use std::collections::BTreeMap;

use super::plan::RunPlan;
use crate::workload::Workload;

/// How a plan field enters compare's fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Compared from the summary field named (recorded before these settings were).
    Summary(&'static str),
    /// Recorded in summary.json's `plan_settings` under this name, and compared there.
    Setting(&'static str),
    /// Does not change what is measured, for the reason given.
    Not(&'static str),
}

/// Every field of the run plan, by its name in plan.json.
pub const PLAN_FIELDS: &[(&str, Use)] = &[
    ("backends", Use::Summary("backends")),
    ("phases", Use::Summary("each phase's own fields (PHASE_FIELDS)")),
    ("out", Use::Not("where the result sets are written")),
    ("timeouts", Use::Setting("request timeout")),
    ("connections", Use::Summary("each backend's connections")),
    ("command", Use::Not("the words typed: every setting they make is compared by its own field")),
    ("nemesis", Use::Summary("nemesis_schedule: each fault's kind and target")),
    ("nemesis_interval", Use::Summary("nemesis_interval_s")),
    ("fencing", Use::Summary("fencing")),
    ("history", Use::Setting("history")),
    ("fail_on_violation", Use::Not("the run's exit status only")),
    ("target", Use::Summary("target (the servers' own versions and durability are recorded per backend)")),
    ("soak", Use::Not("the soak's goal judges the harness's memory after the phases; the phases are compared by their own fields")),
    ("repeat", Use::Not("how many samples, not what each measures: compare pools the repeats")),
    ("shard", Use::Setting("shard")),
    ("resource", Use::Summary("resource_server")),
    ("properties", Use::Not("the expiry and reentrancy probes run after the phases; compare reads none of their figures")),
    ("durability", Use::Summary("each backend's durability")),
];

/// Every field of a phase's workload, by its name in plan.json.
pub const PHASE_FIELDS: &[(&str, Use)] = &[
    ("name", Use::Summary("workload name")),
    ("clients", Use::Summary("clients")),
    ("keys", Use::Summary("keys")),
    ("key_dist", Use::Summary("key_dist")),
    ("zipf_s", Use::Setting("zipf exponent")),
    ("hold", Use::Summary("hold")),
    ("think", Use::Summary("think")),
    ("ttl", Use::Summary("ttl_ms (also the TTL the fault rounds' room is reckoned from)")),
    ("wait_timeout", Use::Summary("wait_timeout_ms")),
    ("duration", Use::Summary("duration_s")),
    ("ops", Use::Setting("ops limit")),
    ("warmup", Use::Summary("warmup_s")),
    ("rate", Use::Summary("open_loop.target_rate")),
    ("retry_interval", Use::Setting("retry interval")),
    ("no_faults", Use::Summary("each phase's faults (nemesis events, faults applied)")),
    ("seed", Use::Not("which keys and sampled durations are drawn: the same distribution, another draw; runs of one plan are repeats whatever their seeds")),
];

impl RunPlan {
    /// The plan settings that change what is measured and that the summary records nowhere
    /// else, by name: compared by `compare` as a fingerprint. Every field is named here, so a
    /// new one does not compile until it is given a place ([`PLAN_FIELDS`]).
    pub fn settings(&self) -> BTreeMap<String, String> {
        let RunPlan {
            backends: _,
            phases,
            out: _,
            timeouts,
            connections: _,
            command: _,
            nemesis: _,
            nemesis_interval: _,
            fencing: _,
            history: _,
            fail_on_violation: _,
            target: _,
            soak: _,
            repeat: _,
            shard,
            resource: _,
            properties: _,
            durability: _,
        } = self;
        let mut s = BTreeMap::new();
        // Whether the history is kept (`auto` decides by the backends) is what changes the
        // figures: its writer is on every operation's path.
        s.insert("history".into(), if self.history_on() { "on" } else { "off" }.into());
        s.insert("request timeout".into(), crate::util::fmt_duration(timeouts.request));
        s.insert("shard".into(), shard.as_ref().map_or("none".into(), |x| format!("{}/{}", x.index, x.count)));
        for w in phases {
            phase_settings(w, &mut s);
        }
        s
    }
}

/// A phase's settings that its summary does not record, under "workload/clients setting".
fn phase_settings(w: &Workload, s: &mut BTreeMap<String, String>) {
    let Workload {
        name,
        clients,
        keys: _,
        key_dist: _,
        zipf_s,
        hold: _,
        think: _,
        ttl: _,
        wait_timeout: _,
        duration: _,
        ops,
        warmup: _,
        rate: _,
        retry_interval,
        seed: _,
        no_faults: _,
    } = w;
    let at = |what: &str| format!("{name}/{clients} {what}");
    if w.key_dist == crate::workload::KeyDist::Zipf {
        s.insert(at("zipf exponent"), zipf_s.to_string());
    }
    s.insert(at("ops limit"), ops.map_or("none".into(), |o| o.to_string()));
    s.insert(at("retry interval"), crate::util::fmt_duration(*retry_interval));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::HistoryMode;

    /// A plan with every optional field set, so that its JSON names every field.
    fn full_plan() -> RunPlan {
        let w = Workload { ops: Some(10), rate: Some(100.0), seed: Some(1), key_dist: crate::workload::KeyDist::Zipf, ..Workload::default() };
        RunPlan {
            backends: vec![crate::kind::BackendKind::Memory],
            phases: vec![w],
            out: "out".into(),
            timeouts: Default::default(),
            connections: dlbench_core::Connections::PerClient,
            command: vec![],
            nemesis: vec![],
            nemesis_interval: std::time::Duration::from_secs(10),
            fencing: crate::judgement::FencingMode::Both,
            history: HistoryMode::Off,
            fail_on_violation: true,
            target: super::super::TargetChoice::Local,
            soak: Some(Default::default()),
            repeat: 1,
            shard: Some(crate::shard::ShardSpec { index: 0, count: 2, start_at: None }),
            resource: None,
            properties: false,
            durability: vec![Default::default()],
        }
    }

    /// The names a table lists that `json` lacks, and those `json` has that it lacks.
    fn unlisted(json: &serde_json::Value, table: &[(&str, Use)], skipped: &[&str]) -> Vec<String> {
        let have: Vec<&str> = json.as_object().unwrap().keys().map(|k| k.as_str()).chain(skipped.iter().copied()).collect();
        let mut out: Vec<String> = have.iter().filter(|k| !table.iter().any(|(n, _)| n == *k)).map(|k| format!("{k} is neither compared nor marked")).collect();
        out.extend(table.iter().filter(|(n, _)| !have.contains(n)).map(|(n, _)| format!("{n} is listed but no longer a field")));
        out
    }

    #[test]
    fn every_plan_field_is_compared_or_marked_with_a_reason() {
        let plan = full_plan();
        let json = serde_json::to_value(&plan).unwrap();
        // `timeouts` is not serialized (serde skip); the destructuring in `settings` names it.
        let mut wrong = unlisted(&json, PLAN_FIELDS, &["timeouts"]);
        wrong.extend(unlisted(&json["phases"][0], PHASE_FIELDS, &[]));
        assert!(wrong.is_empty(), "plan fields without a place in compare's fingerprint: {}", wrong.join("; "));
        // Every setting the tables promise is recorded.
        let s = plan.settings();
        for (field, u) in PLAN_FIELDS.iter().chain(PHASE_FIELDS) {
            if let Use::Setting(name) = u {
                assert!(s.keys().any(|k| k.ends_with(name)), "{field}: setting {name:?} not recorded in {s:?}");
            }
            if let Use::Not(why) | Use::Summary(why) = u {
                assert!(!why.is_empty(), "{field}: no reason given");
            }
        }
        assert_eq!(s["history"], "off");
    }

    #[test]
    fn history_is_recorded_as_kept_or_not() {
        let mut plan = full_plan();
        plan.history = HistoryMode::Auto;
        assert_eq!(plan.settings()["history"], "off", "memory: auto keeps none, as --history off");
        plan.history = HistoryMode::On;
        assert_eq!(plan.settings()["history"], "on");
    }
}
