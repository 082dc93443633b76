//! Tests of the workflow on the fixtures: head selection, preparation in the head's line
//! form, the rank report, and measuring commands.

use std::time::Duration;

use super::*;
use crate::schedule::space::{ScheduleSpace, SpaceOptions};
use crate::{CostModel, CsrPattern, ErrorKind, LoadOptions};

fn cognate() -> Model {
    Model::load("tests/data/fixtures/tiny-cognate", &LoadOptions::default()).unwrap()
}

fn banded(n: usize) -> CsrPattern {
    let (mut row_ptr, mut col_idx) = (vec![0usize], Vec::new());
    for r in 0..n {
        for c in r.saturating_sub(1)..(r + 2).min(n) {
            col_idx.push(c as u32);
        }
        row_ptr.push(col_idx.len());
    }
    CsrPattern::new(n, n, row_ptr, col_idx).unwrap()
}

/// The WACO SpMM space with two values per split and chunk (5 184 configurations).
fn small_taco() -> crate::schedule::space::TacoSpace {
    let mut taco = crate::schedule::space::TacoSpace::waco(Kernel::SpMM);
    taco.splits = vec![vec![1, 4], vec![1, 8], vec![1, 16]];
    taco.chunks = vec![1, 16];
    taco
}

#[test]
fn heads_are_selected_by_name_target_and_kernel() {
    let model = cognate();
    let info = model.info();
    let h = select_head(info, None, Some(Target::Spade), Some(Kernel::SDDMM)).unwrap();
    assert_eq!(h.name, "spade/sddmm");
    let h = select_head(info, Some("spade/spmm"), Some(Target::Spade), None).unwrap();
    assert_eq!(h.kernel, Kernel::SpMM);
    // A named head for another target, no head, several heads, an unknown name.
    let e = select_head(info, Some("spade/spmm"), Some(Target::CpuTaco), None).unwrap_err();
    assert!(e.to_string().contains("not target cpu-taco"), "{e}");
    let e = select_head(info, None, Some(Target::CpuTaco), Some(Kernel::SpMV)).unwrap_err();
    assert!(e.to_string().contains("cpu-taco spmv"), "{e}");
    let e = select_head(info, None, Some(Target::Spade), None).unwrap_err();
    assert!(e.to_string().contains("2 heads"), "{e}");
    let e = select_head(info, Some("cpu/none"), None, None).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::UnknownHead { .. }), "{e:?}");
}

#[test]
fn prepare_picks_the_head_and_its_line_form() {
    let model = cognate();
    let pattern = banded(40);
    let shape = MatrixShape::from(&pattern);
    let matrix = model.embed_matrix(&pattern).unwrap();
    for name in ["taco-spmm", "spade-spmm", "spade-sddmm", "sparsetir-spmm"] {
        let space = match name {
            "taco-spmm" => AnySpace::from(small_taco()),
            _ => AnySpace::from_name(name, &SpaceOptions::default()).unwrap(),
        };
        let cands = prepare(&model, None, &space, &shape).unwrap();
        assert_eq!(cands.space_name(), format!("{name}-unified"));
        assert!(cands.ranked_count() > 0, "{name}");
        let top = model.top_k_with_default(&matrix, &cands, 5).unwrap();
        let report = SpaceRankReport::new("band40", &cands, &top).unwrap();
        assert_eq!(report.entries.len(), top.entries.len());
        let d = report.default_entry().unwrap();
        assert!(d.is_default && d.index == cands.default_index());
        for (e, t) in report.entries.iter().zip(&top.entries) {
            assert_eq!(e.rank, t.rank.map(|r| r + 1));
            let c = cands.config(e.index).unwrap();
            assert_eq!(e.toolchain, c.render("band40").unwrap());
            assert_eq!(
                e.line,
                space.clone().with_form(LineForm::Unified).to_line(&c)
            );
        }
        let ranks: Vec<usize> = report.entries[..top.top_len]
            .iter()
            .map(|e| e.rank.unwrap())
            .collect();
        assert_eq!(ranks, (1..=top.top_len).collect::<Vec<_>>());
    }
    // SPADE has no SpMV space; the fixture has no TACO SDDMM head.
    let e = AnySpace::from_name("spade-spmv", &SpaceOptions::default()).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::UnsupportedKernel { .. }),
        "{e}"
    );
    let space = AnySpace::from_name("taco-sddmm", &SpaceOptions::default()).unwrap();
    assert!(prepare(&model, None, &space, &shape).is_err());
}

#[test]
fn waco_heads_take_native_lines() {
    let model = Model::load(
        "tests/data/fixtures/tiny-waco-spmm",
        &LoadOptions::default(),
    )
    .unwrap();
    let space = AnySpace::from(small_taco());
    let cands = prepare(&model, None, &space, &MatrixShape::new(64, 64, 200)).unwrap();
    assert_eq!(cands.space_name(), "taco-spmm");
    let d = cands.default_index();
    assert_eq!(
        cands.line(d).unwrap(),
        "1 1 1 i1 i0 k1 k0 j1 j0 1 1 0 1 i1 48 32"
    );
}

#[test]
fn measure_command_reads_times_and_reports_failures() {
    let t = Duration::from_secs(10);
    let cmd = MeasureCommand::new("printf 'got %s\\n' {}; echo \"$DASHRANK_INDEX\" ms", t).unwrap();
    assert_eq!(cmd.measure(7, "1 2", "a b").unwrap(), 7.0);
    let cmd = MeasureCommand::new("test {} = 'x y' && echo 2.5ms", t).unwrap();
    assert_eq!(cmd.measure(0, "", "x y").unwrap(), 2.5);
    let cmd = MeasureCommand::new("echo oops >&2; exit 3 # {}", t).unwrap();
    assert_eq!(
        cmd.measure(0, "", "c").unwrap_err(),
        MeasureFailure::Exit {
            code: Some(3),
            stderr: "oops".into()
        }
    );
    let cmd = MeasureCommand::new("echo no time here {}", t).unwrap();
    assert!(matches!(
        cmd.measure(0, "", "c"),
        Err(MeasureFailure::NoTime { .. })
    ));
    // A command (and the child it starts) running past the timeout is killed.
    let started = std::time::Instant::now();
    let cmd = MeasureCommand::new("sleep 30 | cat; echo 1 {}", Duration::from_millis(300)).unwrap();
    let e = cmd.measure(0, "", "c").unwrap_err();
    assert_eq!(e, MeasureFailure::Timeout(Duration::from_millis(300)));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(e.to_string().contains("timed out"));
    assert!(MeasureCommand::new("no placeholder", t).is_err());
    assert!(MeasureCommand::new("x {}", Duration::ZERO).is_err());
}

/// Processes of group `pgid` still running a second after the call (a killed process needs
/// a moment to die; zombies, which only wait to be reaped by their new parent, do not count),
/// from `/proc`.
#[cfg(target_os = "linux")]
fn live_in_group(pgid: u32) -> Vec<u32> {
    let started = std::time::Instant::now();
    loop {
        let live = live_in_group_now(pgid);
        if live.is_empty() || started.elapsed() > Duration::from_secs(1) {
            return live;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(target_os = "linux")]
fn live_in_group_now(pgid: u32) -> Vec<u32> {
    let mut live = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command name in parentheses: state, ppid, pgrp, ...
        let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        if rest[0] != "Z" && rest[2] == pgid.to_string() {
            live.push(pid);
        }
    }
    live
}

/// Runs `template` (which may use `$GROUP_FILE`, where the command writes its process group)
/// on a thread, and returns its result, how long it took and the group, or `None` when it has
/// not returned after 20 s (the group is then killed).
#[cfg(target_os = "linux")]
fn measure_bounded(
    template: &str,
    timeout: Duration,
) -> Option<(std::result::Result<f64, MeasureFailure>, Duration, u32)> {
    let file = std::env::temp_dir().join(format!(
        "dashrank-measure-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let template = format!("echo $$ > '{}'; {template}", file.display());
    let cmd = MeasureCommand::new(&template, timeout).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let started = std::time::Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(cmd.measure(0, "", "c"));
    });
    let result = rx.recv_timeout(Duration::from_secs(20));
    let group: u32 = std::fs::read_to_string(&file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::remove_file(&file).ok();
    match result {
        Ok(r) => Some((r, started.elapsed(), group)),
        Err(_) => {
            // SAFETY: `kill` has no memory-safety preconditions; cleaning up the test's group.
            unsafe { libc::kill(-(group as libc::pid_t), libc::SIGKILL) };
            None
        }
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_background_child_holding_stdout_is_not_waited_for_and_not_left_behind() {
    // The child keeps stdout open for 15 s; the measurement is over when the shell exits.
    let (r, took, group) =
        measure_bounded("(sleep 15 &); echo 1.5 {}", Duration::from_secs(2)).unwrap();
    assert_eq!(r, Ok(1.5));
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(live_in_group(group), Vec::<u32>::new(), "orphans left");
    // A child that would never end does not hang the measurement.
    let (r, took, group) =
        measure_bounded("sleep 1e9 & echo 2 {}", Duration::from_secs(60)).expect("returns");
    assert_eq!(r, Ok(2.0));
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(live_in_group(group), Vec::<u32>::new(), "orphans left");
}

#[cfg(target_os = "linux")]
#[test]
fn a_timeout_ends_the_whole_group_and_closes_the_pipes() {
    let t = Duration::from_millis(500);
    let (r, took, group) = measure_bounded("sleep 1e9 & sleep 1e9; echo 1 {}", t).unwrap();
    assert_eq!(r, Err(MeasureFailure::Timeout(t)));
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(live_in_group(group), Vec::<u32>::new(), "orphans left");
    // Endless output: only its tail is kept, and the timeout still holds.
    let (r, took, _) = measure_bounded("yes; echo {}", t).unwrap();
    assert_eq!(r, Err(MeasureFailure::Timeout(t)));
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[test]
fn measure_output_keeps_its_tail() {
    let t = Duration::from_secs(20);
    // 10 MB of output, then the time: read from the kept tail.
    let cmd = MeasureCommand::new("yes x | head -c 10000000; echo; echo 1.5 ms {}", t).unwrap();
    assert_eq!(cmd.measure(0, "", "c"), Ok(1.5));
    let cmd = MeasureCommand::new(
        "yes y | head -c 3000000 >&2; echo >&2; echo last >&2; exit 3 # {}",
        t,
    )
    .unwrap();
    assert_eq!(
        cmd.measure(0, "", "c"),
        Err(MeasureFailure::Exit {
            code: Some(3),
            stderr: "last".into()
        })
    );
}

#[test]
fn measure_timeouts_are_bounded() {
    let e = MeasureCommand::new("x {}", Duration::MAX).unwrap_err();
    assert!(
        e.to_string().contains("longer than the 604800 s accepted"),
        "{e}"
    );
    assert!(MeasureCommand::new("x {}", MeasureCommand::MAX_TIMEOUT).is_ok());
}
