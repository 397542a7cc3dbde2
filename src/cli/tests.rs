//! The command line's own tests: every example parses, help lines, defaults, colour.

use super::args::*;
use crate::workload;
use super::plans::*;
use super::*;


#[test]
fn a_soak_runs_in_rounds_whose_first_ends_inside_the_warm_up() {
    let s = Duration::from_secs;
    // An hour, five backends, a fault every 10 s: 14 rounds of 51 s turns; the first
    // round (257 s) ends inside the 300 s warm-up with room for the servers' start-up.
    let (r, turn) = soak_rounds(s(3600), 5, s(10), None).unwrap();
    assert_eq!(r, 14);
    assert!((turn.as_secs_f64() - 3600.0 / 70.0).abs() < 1e-6, "{turn:?}");
    assert!(turn * 5 < Duration::from_secs_f64(crate::usage::warmup_for(3600.0)));
    // Two minutes: turns may not be shorter than two fault intervals, so one round.
    assert_eq!(soak_rounds(s(120), 5, s(10), None).unwrap(), (1, s(24)));
    // Asked for, within bounds.
    assert_eq!(soak_rounds(s(600), 2, s(10), Some(3)).unwrap(), (3, s(100)));
    let e = soak_rounds(s(600), 2, s(10), Some(20)).unwrap_err().to_string();
    assert!(e.contains("--rounds 20") && e.contains("at most 15 rounds"), "{e}");
    let e = soak_rounds(s(60), 5, s(10), None).unwrap_err().to_string();
    assert!(e.contains("too short for faults every 10s") && e.contains("at least 100s"), "{e}");
}

/// The example lines of a subcommand's `--help` (`  dlbench ...`, comments dropped).
fn examples(sub: &clap::Command) -> Vec<String> {
    let text = sub.get_after_long_help().map(|h| h.to_string()).unwrap_or_default();
    // The examples only: the block under "Examples:" (run's glossary follows it).
    text.lines()
        .skip_while(|l| *l != "Examples:")
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.trim_start().strip_prefix("dlbench "))
        .map(|l| l.split(" # ").next().unwrap().trim().to_string())
        .collect()
}

/// Every example parses as written: the flags exist and their values are accepted.
#[test]
fn every_example_parses() {
    let cmd = command();
    let mut seen = 0;
    for sub in cmd.get_subcommands() {
        let lines = examples(sub);
        assert!(!lines.is_empty(), "{} has no examples", sub.get_name());
        for l in lines {
            // A redirect is the shell's, not dlbench's.
            let words: Vec<&str> = l.split(" > ").next().unwrap().split_whitespace().collect();
            assert_eq!(words[0], sub.get_name(), "an example of {} runs {l}", sub.get_name());
            let parsed = command().try_get_matches_from(std::iter::once("dlbench").chain(words.iter().copied()));
            assert!(parsed.is_ok(), "dlbench {l}: {}", parsed.unwrap_err());
            seen += 1;
        }
    }
    assert!(seen >= 20, "{seen} examples");
}

/// `dlbench -h` gives each subcommand one line: a short first paragraph, the rest in --help.
#[test]
fn every_about_is_one_short_line_with_detail_in_long_about() {
    for sub in command().get_subcommands() {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        assert!(!about.is_empty() && !about.contains('\n') && about.len() <= 80, "{}: {about:?}", sub.get_name());
        let long = sub.get_long_about().map(|a| a.to_string()).unwrap_or_default();
        assert!(long.len() > about.len(), "{} has no detail for --help", sub.get_name());
    }
}

/// `--backends` and its alias `--backend` give `scenario` the same list.
#[test]
fn scenario_backends_and_backend_alias_parse_alike() {
    for flag in ["--backends", "--backend"] {
        let cli = Cli::from_arg_matches(&command().try_get_matches_from(["dlbench", "scenario", "S1", flag, "redis,etcd"]).unwrap()).unwrap();
        match cli.command {
            Command::Scenario(a) => assert_eq!(a.backends, "redis,etcd", "{flag}"),
            other => panic!("{other:?}"),
        }
    }
}

/// `--waiters` is a comma-separated list, every count checked; `--locks` one count.
#[test]
fn scenario_sizes_parse() {
    let parse = |args: &[&str]| {
        let mut v = vec!["dlbench", "scenario", "U7"];
        v.extend_from_slice(args);
        command().try_get_matches_from(v).and_then(|m| Cli::from_arg_matches(&m))
    };
    match parse(&[]).unwrap().command {
        Command::Scenario(a) => assert_eq!((a.waiters, a.locks), (vec![1, 10, 100, 1000], 1000)),
        other => panic!("{other:?}"),
    }
    match parse(&["--waiters", "1,10", "--locks", "200"]).unwrap().command {
        Command::Scenario(a) => assert_eq!((a.waiters, a.locks), (vec![1, 10], 200)),
        other => panic!("{other:?}"),
    }
    for bad in [["--waiters", "1,0"], ["--waiters", "10001"], ["--locks", "0"]] {
        assert!(parse(&bad).is_err(), "{bad:?}");
    }
}

/// The workload defaults in the help are the files' own values, read here straight from
/// workloads/*.toml (not through the loader the help uses).
#[test]
fn workload_defaults_in_the_help_are_the_files_values() {
    let cmd = command();
    let run = cmd.find_subcommand("run").unwrap();
    let help = |id: &str| run.get_arguments().find(|a| a.get_id() == id).unwrap().get_help().unwrap().to_string();
    for (name, text) in workload::SHIPPED {
        let t: toml::Table = toml::from_str(text).unwrap();
        let clients = t["clients"].as_integer().unwrap();
        assert!(help("clients").contains(&format!("{name}: {clients}")), "{name}: {}", help("clients"));
        let ttl = t["ttl"].as_str().unwrap();
        assert!(help("ttl").contains(&format!("{name}: {ttl}")), "{name}: {}", help("ttl"));
        let keys = t["keys"].as_integer().unwrap();
        assert!(help("keys").contains(&format!("{name}: {keys}")), "{name}: {}", help("keys"));
        match t.get("rate") {
            Some(r) => assert!(help("rate").contains(&format!("{name}: {}", r.as_float().unwrap())), "{}", help("rate")),
            None => assert!(!help("rate").contains(&format!("{name}:")), "{}", help("rate")),
        }
    }
    assert!(help("ops").contains("[default: none"), "{}", help("ops"));
    // soak's --clients carries the same, and its --workload a plain clap default.
    let soak = cmd.find_subcommand("soak").unwrap();
    let soak_help = |id: &str| soak.get_arguments().find(|a| a.get_id() == id).unwrap().get_help().unwrap().to_string();
    assert!(soak_help("clients").contains("many-keys: 8"), "{}", soak_help("clients"));
    assert!(!soak_help("duration").contains("workload file"), "soak's --duration has its own default: {}", soak_help("duration"));
}

#[test]
fn colour_only_on_a_terminal_without_no_color() {
    use std::ffi::OsStr;
    assert!(colour_with(true, None));
    assert!(!colour_with(false, None), "not a terminal");
    assert!(!colour_with(true, Some(OsStr::new("1"))), "NO_COLOR=1");
    assert!(colour_with(true, Some(OsStr::new(""))), "an empty NO_COLOR does not count (no-color.org)");
    assert!(!colour(false));
}

/// `run --help` ends with the glossary: every term in it, every line within 100 columns.
#[test]
fn run_help_ends_with_the_glossary() {
    let cmd = command();
    let run = cmd.find_subcommand("run").unwrap();
    let text = run.get_after_long_help().unwrap().to_string();
    assert!(text.starts_with("Examples:"), "{text}");
    for (term, _) in crate::judgement::glossary::glossary() {
        assert!(text.contains(&format!("\n  {term}: ")), "{term} missing:\n{text}");
    }
    let wide: Vec<&str> = text.lines().filter(|l| l.chars().count() > 100).collect();
    assert!(wide.is_empty(), "lines over 100 columns: {wide:?}");
}

/// `util::wrap` breaks at spaces within the width, indents, and keeps every word.
#[test]
fn wrap_keeps_words_within_the_width() {
    let text = "one two three four five six seven eight nine ten";
    let w = crate::util::wrap(text, 12, 2, 4);
    assert_eq!(w, "  one two\n    three\n    four\n    five six\n    seven\n    eight\n    nine ten\n");
    assert_eq!(w.split_whitespace().collect::<Vec<_>>().join(" "), text);
}

/// The compose target has no NATS service: `--backends nats` there is refused in one line
/// naming the way out, `all` leaves nats out and says so, and other targets keep it.
#[test]
fn compose_refuses_nats_and_all_leaves_it_out() {
    let plan = |args: &[&str]| {
        let mut v = vec!["dlbench", "run"];
        v.extend_from_slice(args);
        match Cli::from_arg_matches(&command().try_get_matches_from(v).unwrap()).unwrap().command {
            Command::Run(a) => build_run_plan(a),
            other => panic!("{other:?}"),
        }
    };
    let e = plan(&["--target", "compose", "--backends", "etcd,nats"]).unwrap_err().to_string();
    assert!(e.contains("compose target has no NATS service") && e.contains("--target local") && !e.contains('\n'), "{e}");
    let (p, notices) = plan(&["--target", "compose", "--backends", "all"]).unwrap();
    assert!(!p.backends.contains(&crate::kind::BackendKind::Nats) && p.backends.len() == 11, "{:?}", p.backends);
    assert!(notices.iter().any(|n| n.contains("leaves out nats")), "{notices:?}");
    let (p, _) = plan(&["--backends", "all"]).unwrap();
    assert!(p.backends.contains(&crate::kind::BackendKind::Nats));
}

/// `--durability`: levels parse into the plan (default: the one level `default`); a compose
/// or external target refuses any other level in one line, before anything starts; several
/// levels refuse the memory backend.
#[test]
fn durability_levels_are_planned_and_refused_where_dlbench_cannot_set_them() {
    use crate::durability::Durability;
    let plan = |args: &[&str]| {
        let mut v = vec!["dlbench", "run"];
        v.extend_from_slice(args);
        match Cli::from_arg_matches(&command().try_get_matches_from(v).unwrap()).unwrap().command {
            Command::Run(a) => build_run_plan(a).map(|p| p.0),
            other => panic!("{other:?}"),
        }
    };
    let p = plan(&["--backends", "redis"]).unwrap();
    assert_eq!(p.durability, vec![Durability::Default]);
    assert!(p.target_options().durability.is_default(), "the servers keep the settings they always had");
    let p = plan(&["--backends", "redis,postgres", "--durability", "relaxed,strict"]).unwrap();
    assert_eq!(p.durability, vec![Durability::Relaxed, Durability::Strict]);
    p.validate().unwrap();
    assert_eq!(p.target_options().durability, Durability::Relaxed);
    let e = plan(&["--target", "compose", "--backends", "redis", "--durability", "strict"]).unwrap().validate().unwrap_err().to_string();
    assert!(e.contains("--durability strict") && e.contains("records the settings it finds") && !e.contains('\n'), "{e}");
    plan(&["--target", "compose", "--backends", "redis"]).unwrap().validate().unwrap();
    let e = plan(&["--backends", "memory,redis", "--durability", "default,strict"]).unwrap().validate().unwrap_err().to_string();
    assert!(e.contains("memory"), "{e}");
    assert!(plan(&["--durability", "fast"]).unwrap_err().to_string().contains("not a level"));
}

/// `dlbench run` alone plans the answer: the speed workloads without faults, then the fault
/// round (the hot key, holders inside 200 ms, TTL 2s) under each backend's leader killed and
/// paused, as long as the backend needing most room needs; any workload flag or --nemesis
/// plans what was written; `--preset answer` is refused where it cannot run, in one line.
#[test]
fn the_default_plan_is_the_answer() {
    use crate::cli::preset;
    let plan = |args: &[&str]| {
        let mut v = vec!["dlbench", "run"];
        v.extend_from_slice(args);
        match Cli::from_arg_matches(&command().try_get_matches_from(v).unwrap()).unwrap().command {
            Command::Run(a) => build_run_plan(a).map(|p| p.0),
            other => panic!("{other:?}"),
        }
    };
    let p = plan(&[]).unwrap();
    p.validate().unwrap();
    let names: Vec<(&str, bool)> = p.phases.iter().map(|w| (w.name.as_str(), p.faulted(w))).collect();
    assert_eq!(names, [("hot-key", false), ("many-keys", false), (preset::ROUND, true)]);
    assert_eq!(p.nemesis.iter().map(|f| f.to_string()).collect::<Vec<_>>(), ["kill:leader", "pause:leader"]);
    let round = &p.phases[2];
    assert_eq!((round.hold.max(), round.ttl, round.keys, p.nemesis_interval), (preset::HOLD, preset::TTL, 1, preset::INTERVAL));
    // Every fault whole, with ZooKeeper's room (TTL 2 s and 6 s to elect) after each heal.
    assert_eq!(round.duration, p.shortest_fault_phase(round));
    assert!(p.duration_advice().is_none(), "{:?}", p.duration_advice());
    // Without faults on the speed workloads: their hold stays 0 (no notice turns it to 25 ms).
    assert!(p.phases[0].hold.max().is_zero());
    // Redlock alone has no leader: a node of it, killed then paused.
    let p = plan(&["--backends", "redlock"]).unwrap();
    assert_eq!(p.nemesis.iter().map(|f| f.to_string()).collect::<Vec<_>>(), ["kill", "pause"]);
    p.validate().unwrap();
    // What the user wrote runs as written.
    for args in [&["--workload", "hot-key"][..], &["--duration", "2s"], &["--nemesis", "kill", "--duration", "60s"], &["--backends", "memory"], &["--preset", "speed"]] {
        let p = plan(args).unwrap();
        assert!(p.phases.iter().all(|w| w.name != preset::ROUND), "{args:?}");
    }
    // Asked for by name, the flags shape its speed workloads; the round keeps its own.
    let p = plan(&["--preset", "answer", "--duration", "2s"]).unwrap();
    assert_eq!(p.phases[0].duration, Duration::from_secs(2));
    assert!(p.phases[2].duration > Duration::from_secs(10));
    for (args, want) in [
        (&["--preset", "answer", "--nemesis", "kill"][..], "drop --nemesis"),
        (&["--preset", "answer", "--backends", "memory"], "drop memory"),
        (&["--preset", "answer", "--target", "external", "--endpoints", "x.toml"], "--target local or compose"),
    ] {
        let e = plan(args).unwrap_err().to_string();
        assert!(e.contains(want) && !e.contains('\n'), "{args:?}: {e}");
    }
}

/// What a run prints keeps within 100 columns by default: the real default run of the
/// decision fixture (five backends, speed and fault rounds, whose per-phase table is some 150
/// columns wide with every column), and the same run with one verdict doctored to a long
/// headline. With `--wide` (no limit) the same text has longer lines: the test can fail.
#[test]
fn a_run_prints_nothing_over_100_columns_unless_asked() {
    let mut s: crate::summary::Summary = serde_json::from_str(include_str!("../../tests/fixtures/decision/summary.json")).unwrap();
    let dir = std::path::Path::new("results/20261207-000000-abcd");
    let over = |t: &str| t.lines().filter(|l| l.chars().count() > crate::util::WIDTH).map(String::from).collect::<Vec<_>>();
    let wide = output::run_text(&s, dir, usize::MAX);
    assert!(!over(&wide).is_empty(), "the fixture's full table should be wider than 100 columns");
    let long = "unsafe; NOT RECOVERED: no grant in the 5.1 s after a heal, 3 overlaps, 2 lost updates, a verdict with many words in it";
    s.backends[1].workloads[0].verdict.as_mut().unwrap().headline = long.into();
    let text = output::run_text(&s, dir, crate::util::WIDTH);
    assert_eq!(over(&text), Vec::<String>::new(), "lines over 100 columns:\n{text}");
    // Nothing is lost by fitting: the long headline is all there, wrapped under its column,
    // and the columns left out are named.
    let words: Vec<&str> = text.split_whitespace().collect();
    assert!(words.windows(long.split_whitespace().count()).any(|w| w.join(" ") == long), "the long verdict is cut:\n{text}");
    assert!(text.contains("Left out to fit 100 columns: handoff p50") && text.contains("--wide prints them"), "{text}");
    // A terminal wider than the table prints it whole.
    assert!(output::run_text(&s, dir, 400).lines().all(|l| !l.starts_with("Left out")));
}
