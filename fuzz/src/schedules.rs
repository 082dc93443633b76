//! Schedule text from other tools: lines against each committed schema, TACO commands,
//! SPADE CSV rows and SparseTIR JSON.

use std::sync::OnceLock;

use dashrank::program::taco::{TacoCommand, TacoOptions, TacoProgram};
use dashrank::schedule::space::{GpuConfig, Kernel, MatrixShape, SpadeRow, SuperSchedule};
use dashrank::schedule::Schema;
use dashrank::{ErrorKind, LoadOptions, Model};

use super::{check_error, repo_root};

/// Text of a fuzz input: UTF-8 as is, anything else decoded lossily (the APIs take `&str`).
fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

fn schedule_error(e: &dashrank::Error) {
    check_error(e);
    assert!(
        matches!(e.kind(), ErrorKind::Schedule { .. }),
        "schedule text fails with a schedule error: {e:?}"
    );
}

/// Every committed schema: the real WACO SpMM/SDDMM/SpMV bundles when `models/` has them
/// (else the WACO-shaped fixture), and every head of the COGNATE and DASH fixtures.
pub fn schemas() -> &'static [(String, Schema)] {
    static SCHEMAS: OnceLock<Vec<(String, Schema)>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let root = repo_root();
        let mut dirs: Vec<std::path::PathBuf> = ["spmm", "sddmm", "spmv"]
            .iter()
            .map(|k| root.join("models").join(format!("waco-{k}")))
            .filter(|d| d.is_dir())
            .collect();
        if dirs.is_empty() {
            dirs.push(root.join("tests/data/fixtures/tiny-waco-spmm"));
        }
        dirs.push(root.join("tests/data/fixtures/tiny-cognate"));
        dirs.push(root.join("tests/data/fixtures/tiny-dash"));
        let options = LoadOptions {
            threads: Some(1),
            ..LoadOptions::default()
        };
        let mut out = Vec::new();
        for dir in dirs {
            let model = Model::load(&dir, &options)
                .unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()));
            for head in &model.info().heads {
                let schema = model.schema(&head.name).expect("head schema").clone();
                out.push((format!("{}:{}", dir.display(), head.name), schema));
            }
        }
        out
    })
}

/// Schedule lines: `data[0]` picks the schema, the rest is text, one line per `\n`. Every
/// accepted line must print back to a line that parses to the same schedule, and encode to
/// `encoded_width` finite values; the batch encoder must agree line by line.
pub fn schedule_lines(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let all = schemas();
    let (_, schema) = &all[usize::from(pick) % all.len()];
    let text = text(rest);
    let lines: Vec<&str> = text.split('\n').collect();
    let mut valid = 0;
    for line in &lines {
        match schema.parse_line(line) {
            Ok(parsed) => {
                valid += 1;
                let printed = schema.format_line(&parsed);
                let again = schema.parse_line(&printed).expect("printed line parses");
                assert_eq!(again.schedule, parsed.schedule, "{line:?} -> {printed:?}");
                if let Some(ms) = parsed.measured_ms {
                    assert!(ms.is_finite() && ms >= 0.0, "measured time {ms}");
                }
                let row = schema
                    .encode(&parsed.schedule)
                    .expect("valid schedule encodes");
                assert_eq!(row.len(), schema.encoded_width());
                assert!(row.iter().all(|v| v.is_finite()), "{line:?} -> {row:?}");
            }
            Err(e) => schedule_error(&e),
        }
    }
    let batch = schema.encode_batch(&lines);
    assert_eq!(batch.len(), lines.len());
    assert_eq!(batch.n_valid(), valid);
    for (i, e) in batch.errors() {
        assert!(i < lines.len());
        schedule_error(e);
    }
}

const KERNELS: [Kernel; 3] = [Kernel::SpMM, Kernel::SDDMM, Kernel::SpMV];

/// TACO command lines, scheduling commands and WACO SuperSchedule lines: `data[0]` picks the
/// kernel. A parsed command line or command prints back to itself; a SuperSchedule's program
/// reads back from its command line.
pub fn taco_commands(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let kernel = KERNELS[usize::from(pick) % KERNELS.len()];
    let text = text(rest);
    match TacoProgram::parse_command_line(&text) {
        Ok(p) => {
            let printed = p.command_line();
            let again = TacoProgram::parse_command_line(&printed).expect("printed TACO parses");
            assert_eq!(again, p, "{text:?} -> {printed:?}");
        }
        Err(e) => schedule_error(&e),
    }
    for word in text.split_whitespace() {
        if let Ok(c) = word.parse::<TacoCommand>() {
            let again: TacoCommand = c.to_string().parse().expect("printed command parses");
            assert_eq!(again, c, "{word:?}");
        }
    }
    match SuperSchedule::parse(kernel, &text) {
        Ok(s) => check_superschedule(&s),
        Err(e) => schedule_error(&e),
    }
}

fn check_superschedule(s: &SuperSchedule) {
    s.validate().expect("a parsed SuperSchedule is valid");
    let line = s.to_line();
    let again = SuperSchedule::parse(s.kernel, &line).expect("printed line parses");
    assert_eq!(&again, s, "{line}");
    let options = TacoOptions {
        threads: Some(2),
        ..TacoOptions::default()
    };
    let shape = MatrixShape::new(1000, 300, 5000);
    let p =
        TacoProgram::from_superschedule(s, &shape, &options).expect("a valid line has a program");
    let back = TacoProgram::parse_command_line(&p.command_line()).expect("its command line parses");
    assert_eq!(back, p, "{line}");
}

/// SPADE CSV rows, one per line: an accepted row prints back to the same row.
pub fn spade_csv(data: &[u8]) {
    for line in text(data).split('\n') {
        match SpadeRow::parse_csv(line) {
            Ok(row) => {
                let printed = row.to_csv();
                let again = SpadeRow::parse_csv(&printed).expect("printed row parses");
                assert_eq!(again.name, row.name);
                assert_eq!(again.config, row.config);
                assert_eq!(
                    again.time.map(f64::to_bits),
                    row.time.map(f64::to_bits),
                    "{line:?} -> {printed:?}"
                );
            }
            Err(e) => schedule_error(&e),
        }
    }
}

/// SparseTIR configuration JSON, one object or a list: accepted input prints back to equal
/// configurations.
pub fn sparsetir_json(data: &[u8]) {
    let text = text(data);
    match GpuConfig::from_json(&text) {
        Ok(c) => {
            let again = GpuConfig::from_json(&c.to_json()).expect("printed JSON parses");
            assert_eq!(again, c);
        }
        Err(e) => schedule_error(&e),
    }
    match GpuConfig::list_from_json(&text) {
        Ok(list) => {
            let again = GpuConfig::list_from_json(&GpuConfig::list_to_json(&list));
            assert_eq!(again.expect("printed list parses"), list);
        }
        Err(e) => schedule_error(&e),
    }
}
