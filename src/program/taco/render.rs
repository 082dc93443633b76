//! The two text forms of a [`TacoProgram`]: a stock `taco` command line and a TACO C++ API
//! snippet, and the parser that reads the command line back.

use std::fmt::Write as _;

use super::command::is_identifier;
use super::{AxisPart, LoopVar, TacoCommand, TacoProgram, TacoTensor};
use crate::error::Result;
use crate::schedule::space::{parse_u32, space_error, Kernel, LevelFormat};

impl TacoProgram {
    /// The index expression over the program's variables, e.g.
    /// `C(i1,i0,j)=A(i1,i0,k)*B(k,j)`.
    pub fn expression(&self) -> String {
        let access = |t: &TacoTensor| {
            let names: Vec<&str> = t.vars.iter().map(|v| v.name.as_str()).collect();
            format!("{}({})", t.name, names.join(","))
        };
        let operands: Vec<String> = self.tensors[1..].iter().map(access).collect();
        format!("{}={}", access(&self.tensors[0]), operands.join("*"))
    }

    /// The program as one stock `taco` command line (single `float` precision, formats and
    /// dimensions of every tensor, the scheduling commands, threads and OpenMP schedule). The
    /// CLI prints the kernel's C code; add `-write-source=<file>` to keep it.
    pub fn command_line(&self) -> String {
        let mut out = format!("taco \"{}\"", self.expression());
        for t in &self.tensors {
            write!(out, " -f={}:{}", t.name, t.format_letters()).ok();
        }
        for t in &self.tensors {
            write!(out, " -t={}:float", t.name).ok();
        }
        for t in &self.tensors {
            let dims: Vec<String> = t.dims().iter().map(u32::to_string).collect();
            write!(out, " -d={}:{}", t.name, dims.join(",")).ok();
        }
        for c in &self.commands {
            write!(out, " -s=\"{c}\"").ok();
        }
        write!(
            out,
            " -nthreads={} -schedule=dynamic,{}",
            self.threads, self.chunk
        )
        .ok();
        out
    }

    /// The program in TACO's C++ API (`#include <taco.h>`), from the tensor declarations to
    /// `compute()`. The line `// fill:` marks where the operands get their values: `A` from
    /// [`TacoProgram::pack`] (or `A.insert` of the repacked coordinates and `A.pack()`), the
    /// dense operands as row-major arrays.
    pub fn cpp_snippet(&self) -> String {
        let mut out = String::from(
            "// needs #include <taco.h> and <taco/index_notation/transformations.h>\nusing namespace taco;\n",
        );
        let mut vars: Vec<String> = Vec::new();
        for v in self.tensors.iter().flat_map(|t| t.vars.iter()) {
            if !vars.contains(&v.name) {
                vars.push(v.name.clone());
            }
        }
        for c in &self.commands {
            if let TacoCommand::Bound { bound, .. } = c {
                vars.push(bound.clone());
            }
        }
        let decls: Vec<String> = vars.iter().map(|v| format!("{v}(\"{v}\")")).collect();
        writeln!(out, "IndexVar {};", decls.join(", ")).ok();
        for t in &self.tensors {
            let dims: Vec<String> = t.dims().iter().map(u32::to_string).collect();
            let levels: Vec<&str> = t
                .levels
                .iter()
                .map(|l| match l {
                    LevelFormat::Compressed => "Sparse",
                    LevelFormat::Uncompressed => "Dense",
                })
                .collect();
            writeln!(
                out,
                "Tensor<float> {}(\"{}\", {{{}}}, Format({{{}}}));",
                t.name,
                t.name,
                dims.join(", "),
                levels.join(", ")
            )
            .ok();
        }
        out.push_str("// fill: the operands' values go here (A repacked: dashrank_taco_pack)\n");
        let expr = self
            .expression()
            .replace(',', ", ")
            .replace('=', " = ")
            .replace('*', " * ");
        writeln!(out, "{expr};").ok();
        // TACO's own loop order first, as the `taco` CLI and `Tensor::compile()` do.
        out.push_str(
            "IndexStmt stmt = reorderLoopsTopologically(C.getAssignment().concretize());\n",
        );
        for c in &self.commands {
            writeln!(out, "stmt = stmt.{};", cpp_command(c)).ok();
        }
        writeln!(out, "taco_set_num_threads({});", self.threads).ok();
        writeln!(
            out,
            "taco_set_parallel_schedule(ParallelSchedule::Dynamic, {});",
            self.chunk
        )
        .ok();
        out.push_str("C.compile(stmt);\nC.assemble();\nC.compute();\n");
        out
    }

    /// Reads a command line written by [`TacoProgram::command_line`] back.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Schedule`](crate::ErrorKind::Schedule) naming the token that is not part
    /// of such a command line, or the inconsistency (unknown kernel, tensor without format or
    /// dimensions, a variable with two extents).
    pub fn parse_command_line(text: &str) -> Result<Self> {
        let words = shell_words(text)?;
        let mut words = words.iter();
        if words.next().map(String::as_str) != Some("taco") {
            return Err(space_error("taco command", text, "must start with 'taco'"));
        }
        let expr = words
            .next()
            .ok_or_else(|| space_error("taco command", text, "missing the expression"))?;
        let accesses = parse_expression(expr)?;
        let mut parsed = Flags::default();
        for w in words {
            parsed.add(w)?;
        }
        parsed.build(accesses)
    }
}

fn cpp_command(c: &TacoCommand) -> String {
    match c {
        TacoCommand::Bound {
            index,
            bound,
            extent,
            kind,
        } => format!("bound({index}, {bound}, {extent}, BoundType::{kind})"),
        TacoCommand::Reorder(v) => format!("reorder({{{}}})", v.join(", ")),
        TacoCommand::Parallelize { index, unit, races } => {
            format!("parallelize({index}, ParallelUnit::{unit}, OutputRaceStrategy::{races})")
        }
        TacoCommand::Assemble { tensor, strategy } => {
            format!("assemble({tensor}.getTensorVar(), AssembleStrategy::{strategy})")
        }
    }
}

/// Words of a command line: whitespace-separated, double quotes group and are removed.
fn shell_words(text: &str) -> Result<Vec<String>> {
    let mut words = Vec::new();
    let (mut word, mut quoted, mut started) = (String::new(), false, false);
    for c in text.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if quoted {
        return Err(space_error("taco command", text, "unbalanced double quote"));
    }
    if started {
        words.push(word);
    }
    Ok(words)
}

/// `C(i,j)=A(i,k)*B(k,j)` → `[("C", [i, j]), ("A", [i, k]), ("B", [k, j])]`.
fn parse_expression(expr: &str) -> Result<Vec<(String, Vec<String>)>> {
    let bad = |why: &str| space_error("expression", expr, why.to_owned());
    let (lhs, rhs) = expr
        .split_once('=')
        .ok_or_else(|| bad("expected result=operands"))?;
    let mut out = vec![parse_access(lhs).ok_or_else(|| bad("bad result access"))?];
    for a in rhs.split('*') {
        out.push(parse_access(a).ok_or_else(|| bad("bad operand access"))?);
    }
    Ok(out)
}

fn parse_access(s: &str) -> Option<(String, Vec<String>)> {
    let (name, rest) = s.trim().split_once('(')?;
    let vars: Vec<String> = rest
        .strip_suffix(')')?
        .split(',')
        .map(|v| v.trim().to_owned())
        .collect();
    let ok = is_identifier(name) && vars.iter().all(|v| is_identifier(v));
    ok.then(|| (name.to_owned(), vars))
}

#[derive(Default)]
struct Flags {
    formats: Vec<(String, Vec<LevelFormat>)>,
    dims: Vec<(String, Vec<u32>)>,
    commands: Vec<TacoCommand>,
    threads: Option<u32>,
    chunk: Option<u32>,
}

impl Flags {
    fn add(&mut self, word: &str) -> Result<()> {
        let bad = |why: &str| space_error("taco command", word, why.to_owned());
        let (flag, value) = word
            .split_once('=')
            .ok_or_else(|| bad("expected -flag=value"))?;
        match flag {
            "-f" => {
                let (t, letters) = value
                    .split_once(':')
                    .ok_or_else(|| bad("expected -f=T:levels"))?;
                let levels = letters
                    .chars()
                    .map(|c| match c {
                        'd' => Ok(LevelFormat::Uncompressed),
                        's' => Ok(LevelFormat::Compressed),
                        _ => Err(bad("level letters must be d or s")),
                    })
                    .collect::<Result<Vec<_>>>()?;
                self.formats.push((t.to_owned(), levels));
            }
            "-t" if value.ends_with(":float") => {}
            "-d" => {
                let (t, list) = value
                    .split_once(':')
                    .ok_or_else(|| bad("expected -d=T:dims"))?;
                let dims = list
                    .split(',')
                    .map(|d| parse_u32("dimension", d))
                    .collect::<Result<Vec<_>>>()?;
                self.dims.push((t.to_owned(), dims));
            }
            "-s" => self.commands.push(value.parse()?),
            "-nthreads" => self.threads = Some(parse_u32("nthreads", value)?),
            "-schedule" => {
                let c = value
                    .strip_prefix("dynamic,")
                    .ok_or_else(|| bad("expected -schedule=dynamic,<chunk>"))?;
                self.chunk = Some(parse_u32("chunk", c)?);
            }
            _ => return Err(bad("unknown flag")),
        }
        Ok(())
    }

    fn build(self, accesses: Vec<(String, Vec<String>)>) -> Result<TacoProgram> {
        let kernel = kernel_of(&accesses)?;

        let mut tensors = Vec::with_capacity(accesses.len());
        let mut extents: Vec<(String, u32)> = Vec::new();
        for (name, names) in &accesses {
            let levels = lookup(&self.formats, name, "-f= format")?;
            let dims = lookup(&self.dims, name, "-d= dimensions")?;
            if levels.len() != names.len() || dims.len() != names.len() {
                return Err(space_error(
                    "taco command",
                    name,
                    "format, dimensions and modes differ in count",
                ));
            }
            for (n, d) in names.iter().zip(&dims) {
                match extents.iter().find(|(m, _)| m == n) {
                    Some((_, e)) if e != d => {
                        return Err(space_error("dimension", n, "one variable, two extents"))
                    }
                    Some(_) => {}
                    None => extents.push((n.clone(), *d)),
                }
            }
            tensors.push((name.clone(), names.clone(), levels));
        }
        let var = |n: &str| loop_var(n, &extents);
        let tensors = tensors
            .into_iter()
            .map(|(name, names, levels)| {
                let vars = names.iter().map(|n| var(n)).collect::<Result<Vec<_>>>()?;
                Ok(TacoTensor { name, vars, levels })
            })
            .collect::<Result<Vec<_>>>()?;
        let missing = |what: &str| space_error("taco command", what, format!("missing {what}"));
        Ok(TacoProgram {
            kernel,
            tensors,
            commands: self.commands,
            threads: self.threads.ok_or_else(|| missing("-nthreads="))?,
            chunk: self.chunk.ok_or_else(|| missing("-schedule="))?,
        })
    }
}

fn lookup<T: Clone>(list: &[(String, Vec<T>)], t: &str, what: &str) -> Result<Vec<T>> {
    list.iter()
        .find(|(n, _)| n == t)
        .map(|(_, v)| v.clone())
        .ok_or_else(|| space_error("taco command", t, format!("no {what} for tensor {t}")))
}

/// The kernel of an expression by its tensor names and the axes of its result.
fn kernel_of(accesses: &[(String, Vec<String>)]) -> Result<Kernel> {
    let names: Vec<&str> = accesses.iter().map(|(n, _)| n.as_str()).collect();
    let axes = |i: usize| -> Vec<char> {
        let mut a: Vec<char> = accesses[i]
            .1
            .iter()
            .filter_map(|v| v.chars().next())
            .collect();
        a.dedup();
        a
    };
    match names.as_slice() {
        ["C", "A", "B", "D"] => Ok(Kernel::SDDMM),
        ["C", "A", "B"] if axes(0) == ['i', 'j'] => Ok(Kernel::SpMM),
        ["C", "A", "B"] if axes(0) == ['i'] => Ok(Kernel::SpMV),
        _ => Err(space_error(
            "expression",
            names.join(","),
            "not an SpMM (C=A*B), SDDMM (C=A*B*D) or SpMV (C=A*B) of dashrank's form",
        )),
    }
}

/// A variable from its name (`i`, `i1`, `i0`) and the extents of all variables.
fn loop_var(name: &str, extents: &[(String, u32)]) -> Result<LoopVar> {
    let extent_of = |n: &str| extents.iter().find(|(m, _)| m == n).map(|(_, e)| *e);
    let mut chars = name.chars();
    let axis = chars.next().unwrap_or(' ');
    let bad = || {
        space_error(
            "variable",
            name,
            "expected i, j or k, optionally followed by 1 or 0",
        )
    };
    if !matches!(axis, 'i' | 'j' | 'k') {
        return Err(bad());
    }
    let extent = extent_of(name).ok_or_else(bad)?;
    let (part, inner) = match chars.as_str() {
        "" => (AxisPart::Whole, extent),
        "1" => (
            AxisPart::Outer,
            extent_of(&format!("{axis}0")).ok_or_else(bad)?,
        ),
        "0" => (AxisPart::Inner, extent),
        _ => return Err(bad()),
    };
    if extent == 0 || inner == 0 {
        return Err(space_error("dimension", name, "must be at least 1"));
    }
    Ok(LoopVar {
        name: name.to_owned(),
        axis,
        part,
        extent,
        inner,
    })
}
