#!/usr/bin/env python3
"""Runs the command blocks of Markdown files, so that the docs cannot drift from the code.

Every fenced block in `sh`, `bash`, `shell` or `console` is a command block: it runs with
`bash -e -o pipefail` and must exit 0. A `yaml` block with jobs and `steps` is a CI workflow
(GitHub Actions syntax): its jobs run as written (see `Workflow`). An HTML comment on the line
before a block's fence (invisible when the Markdown is rendered) changes what happens:

  <!-- doc-test: output -->          before a `text` block: the output (stdout and stderr) of
                                     the command block before it must match; a line `...`
                                     stands for any number of lines, `...` within a line for
                                     any text, trailing blanks are ignored
  <!-- doc-test: exit N -->          the command block must exit with status N
  <!-- doc-test: file NAME -->       the block is written to NAME (a script that later
                                     blocks use), not run
  <!-- doc-test: needs slurm -->     runs only with --slurm (scripts/slurm-test.sh, which
                                     starts a Slurm cluster); reported otherwise
  <!-- doc-test: needs taco -->      runs when stock TACO's measurer is built
                                     (target/taco/dashrank-taco-measure, scripts/taco-tools.sh);
                                     reported otherwise
  <!-- doc-test: skip REASON -->     not run (a long campaign, hardware this machine lacks,
                                     the test suite itself); the reason is printed

The blocks of one Markdown file run in order, as a reader would run them in one terminal:
the working directory and exported variables carry over from block to block. They run in a
scratch copy of the checkout (the files git tracks, as they are in the work tree), with
`../shared` beside it, `target/` linked to the checkout's cargo target directory (builds are
reused) and `.venv` and `models/` to the checkout's (the models directory is a scratch
directory of links, so a block may add or remove bundles). Each file gets a fresh copy, always
at the same path (so cargo's records of what it built stay valid and nothing is rebuilt).

  python3 scripts/doc-blocks.py [--slurm] [--scratch DIR] FILE.md...

Prints one line per block and ends with `doc blocks: N passed, N failed, N skipped`; exits 1
when a block failed or an annotation is malformed.
"""
import argparse
import hashlib
import itertools
import os
import re
import shutil
import subprocess
import sys
import time

COMMAND_LANGS = {"sh", "bash", "shell", "console"}
ANNOTATION = re.compile(r"^<!--\s*doc-test:\s*(\S+)\s*(.*?)\s*-->\s*$")
KINDS = {"output", "exit", "file", "needs", "skip"}


class Block:
    def __init__(self, path, line, lang, text, note):
        self.path, self.line, self.lang, self.text = path, line, lang, text
        self.kind, self.arg = note if note else (None, "")

    def where(self):
        return f"{os.path.relpath(self.path)}:{self.line}"


def parse(path):
    """The fenced blocks of a Markdown file, each with the annotation on the line before it."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)(`{3,})(\S*)", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).split(",")[0]
        note = None
        if i > 0:
            a = ANNOTATION.match(lines[i - 1].strip())
            if a:
                note = (a.group(1), a.group(2))
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        blocks.append(Block(path, i + 1, lang, "\n".join(body) + "\n", note))
        i = j + 1
    return blocks


def check_annotations(blocks):
    """Errors for annotations that are unknown, lack their argument, or sit on the wrong block."""
    errors = []
    for b in blocks:
        if b.kind is None:
            continue
        if b.kind not in KINDS:
            errors.append(f"{b.where()}: unknown annotation 'doc-test: {b.kind}'")
        elif b.kind in ("skip", "file") and not b.arg:
            errors.append(f"{b.where()}: 'doc-test: {b.kind}' needs a {'reason' if b.kind == 'skip' else 'file name'}")
        elif b.kind == "exit" and not b.arg.isdigit():
            errors.append(f"{b.where()}: 'doc-test: exit' needs a status number")
        elif b.kind == "needs" and b.arg not in ("slurm", "taco"):
            errors.append(f"{b.where()}: 'doc-test: needs {b.arg}': only 'slurm' and 'taco' are known")
        elif b.kind == "output" and b.lang != "text":
            errors.append(f"{b.where()}: 'doc-test: output' belongs on a text block")
    return errors


def output_matches(expected, actual):
    """Whether `actual` matches `expected` line by line, `...` standing for any lines."""
    parts = []
    for line in expected.rstrip("\n").split("\n"):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:  # `...` inside a line stands for any text (a temporary path, a time)
            parts.append("[^\n]*".join(re.escape(p) for p in line.rstrip().split("...")) + r"[ \t]*\n")
    actual = "\n".join(l.rstrip() for l in actual.rstrip("\n").split("\n")) + "\n"
    return re.fullmatch("".join(parts), actual) is not None


class Scratch:
    """A scratch copy of the checkout, with ../shared beside it and the caches linked."""

    def __init__(self, checkout, root, shared, target):
        self.checkout, self.root, self.shared, self.target = checkout, root, shared, target
        self.repo = os.path.join(root, "repo")

    def reset(self):
        """Empties the scratch directory and copies the checkout into it again."""
        if os.path.lexists(self.root):
            shutil.rmtree(self.root)
        os.makedirs(self.repo)
        if os.path.isdir(self.shared):
            os.symlink(os.path.abspath(self.shared), os.path.join(self.root, "shared"))
        files = subprocess.run(["git", "ls-files", "-z"], cwd=self.checkout, check=True,
                               capture_output=True).stdout.decode().split("\0")
        for f in filter(None, files):
            src, dst = os.path.join(self.checkout, f), os.path.join(self.repo, f)
            if not os.path.lexists(src):
                continue  # deleted in the work tree
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
            else:
                shutil.copy2(src, dst)  # mtimes kept: cargo rebuilds only what changed
        self.link_caches()

    def link_caches(self):
        os.makedirs(self.target, exist_ok=True)
        os.symlink(self.target, os.path.join(self.repo, "target"))
        venv = os.path.join(self.checkout, ".venv")
        if os.path.isdir(venv):
            os.symlink(venv, os.path.join(self.repo, ".venv"))
        models = os.path.join(self.checkout, "models")
        os.makedirs(os.path.join(self.repo, "models"))
        if os.path.isdir(models):
            for m in sorted(os.listdir(models)):
                os.symlink(os.path.join(models, m), os.path.join(self.repo, "models", m))


class Shell:
    """Runs blocks one after the other, carrying the directory and exported variables over."""

    def __init__(self, cwd, env):
        self.cwd, self.env = cwd, env

    def run(self, script, state_dir):
        os.makedirs(state_dir, exist_ok=True)
        env_file = os.path.join(state_dir, "env")
        wrapper = (
            f"trap 'status=$?; pwd > {state_dir}/cwd; env -0 > {env_file}; exit $status' EXIT\n"
            "set -e -o pipefail\n" + script
        )
        start = time.time()
        p = subprocess.run(["bash", "-c", wrapper], cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if os.path.exists(env_file):
            pairs = open(env_file, "rb").read().decode(errors="replace").split("\0")
            self.env = dict(p.split("=", 1) for p in pairs if "=" in p)
            self.cwd = open(os.path.join(state_dir, "cwd")).read().strip() or self.cwd
        return p.returncode, p.stdout.decode(errors="replace"), time.time() - start


class Workflow:
    """A CI workflow in GitHub Actions syntax, run on this machine.

    Jobs run in the order their `needs` allow (else as written), once per combination of
    their `strategy.matrix`. Each job starts in an empty workspace (the same path every
    time, so cargo's target directory stays valid); `actions/checkout` fills it with the
    scratch copy of the checkout. `run:` steps run with `bash -e -o pipefail`, `${{ matrix.X }}`
    replaced; `actions/upload-artifact` and `actions/download-artifact` (`name`, or
    `pattern` + `merge-multiple`) copy files through an artifacts directory. A step whose
    `if` is `always()` runs after a failure; any other expression is an error, as is any
    other action.
    """

    def __init__(self, doc, scratch, env, log):
        self.jobs = doc.get("jobs", doc)
        self.scratch, self.env, self.log = scratch, env, log
        self.artifacts = scratch.root + "-artifacts"

    def order(self):
        done, order = set(), []
        while len(order) < len(self.jobs):
            ready = [j for j in self.jobs if j not in done and set(self.needs(j)) <= done]
            if not ready:
                raise ValueError(f"jobs with unmet or circular needs: {set(self.jobs) - done}")
            order.append(ready[0])
            done.add(ready[0])
        return order

    def needs(self, job):
        needs = self.jobs[job].get("needs", [])
        return [needs] if isinstance(needs, str) else needs

    def run(self):
        if os.path.lexists(self.artifacts):
            shutil.rmtree(self.artifacts)
        os.makedirs(self.artifacts)
        failed = []
        for job in self.order():
            spec = self.jobs[job]
            if any(n in failed for n in self.needs(job)) and spec.get("if") != "always()":
                self.log(f"  job {job}: not run (a job it needs failed)")
                continue
            matrix = spec.get("strategy", {}).get("matrix", {})
            if any(k in matrix for k in ("include", "exclude")):
                raise ValueError(f"job {job}: matrix include/exclude is not supported")
            keys = list(matrix)
            for values in itertools.product(*(matrix[k] for k in keys)):
                cell = dict(zip(keys, values))
                label = job + (f" ({', '.join(str(v) for v in values)})" if values else "")
                if not self.run_job(label, spec["steps"], cell):
                    failed.append(job)
        return not failed

    def run_job(self, label, steps, cell):
        workspace = self.scratch.repo
        if os.path.lexists(self.scratch.root):
            shutil.rmtree(self.scratch.root)
        os.makedirs(workspace)
        shell, ok = Shell(workspace, dict(self.env)), True
        for n, step in enumerate(steps, 1):
            cond = step.get("if")
            if cond not in (None, "always()"):
                raise ValueError(f"job {label} step {n}: unsupported if: {cond}")
            if not ok and cond != "always()":
                continue
            status, out = self.step(step, cell, shell)
            if status != 0:
                self.log(f"  job {label}: step {n} ({step.get('name') or step.get('uses') or 'run'}) "
                         f"exited {status}:\n" + indent(out))
                ok = False
        self.log(f"  job {label}: {'ok' if ok else 'FAILED'}")
        return ok

    def step(self, step, cell, shell):
        if "run" in step:
            script = expand(step["run"], cell)
            status, out, _ = shell.run(script, self.scratch.root + "-state")
            return status, out
        uses, args = step.get("uses", ""), {k: expand(str(v), cell) for k, v in step.get("with", {}).items()}
        action = uses.split("@")[0]
        if action == "actions/checkout":
            self.scratch.reset()
            shell.cwd = self.scratch.repo
            return 0, ""
        if action == "actions/upload-artifact":
            return self.upload(args, shell.cwd)
        if action == "actions/download-artifact":
            return self.download(args, shell.cwd)
        raise ValueError(f"unsupported step: {step}")

    def upload(self, args, cwd):
        dest = os.path.join(self.artifacts, args["name"])
        os.makedirs(dest, exist_ok=True)
        found = 0
        for pattern in filter(None, (p.strip() for p in args["path"].split("\n"))):
            for src in sorted(glob_in(cwd, pattern.rstrip("/"))):
                found += 1
                target = os.path.join(dest, os.path.relpath(src, cwd))
                if os.path.isdir(src):
                    shutil.copytree(src, target, dirs_exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    shutil.copy2(src, target)
        return (0, "") if found else (1, f"upload-artifact: no files match {args['path']!r}")

    def download(self, args, cwd):
        import fnmatch
        names = sorted(os.listdir(self.artifacts))
        if "name" in args:
            names = [n for n in names if n == args["name"]]
        elif "pattern" in args:
            names = [n for n in names if fnmatch.fnmatch(n, args["pattern"])]
        if not names:
            return 1, f"download-artifact: no artifact matches {args}"
        merge = str(args.get("merge-multiple", "false")).lower() == "true"
        base = os.path.join(cwd, args.get("path", "."))
        for n in names:
            target = base if merge or "name" in args else os.path.join(base, n)
            shutil.copytree(os.path.join(self.artifacts, n), target, dirs_exist_ok=True)
        return 0, ""


def glob_in(cwd, pattern):
    import glob
    return glob.glob(os.path.join(cwd, pattern))


def expand(text, cell):
    def sub(m):
        expr = m.group(1).strip()
        if expr.startswith("matrix.") and expr[7:] in cell:
            return str(cell[expr[7:]])
        raise ValueError(f"unsupported expression ${{{{ {expr} }}}}")
    return re.sub(r"\$\{\{(.*?)\}\}", sub, text)


def indent(text, limit=40):
    lines = text.rstrip("\n").split("\n")
    if len(lines) > limit:
        lines = lines[:5] + [f"... ({len(lines) - limit} lines)"] + lines[-(limit - 5):]
    return "\n".join("    | " + l for l in lines)


def default_scratch(checkout):
    """The scratch directory of a checkout: outside its cargo target directory, or cargo would
    record the copy's sources as build outputs there and judge the checkout's own builds by
    the copy's files (edits to the checkout would then not rebuild)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    key = hashlib.sha256(checkout.encode()).hexdigest()[:12]
    return os.path.join(cache, "dashrank", f"doc-blocks-{key}")


class Runner:
    def __init__(self, args):
        self.args = args
        self.checkout = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
        self.target = os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(self.checkout, "target"))
        self.scratch_root = os.path.abspath(args.scratch or default_scratch(self.checkout))
        self.shared = os.path.abspath(os.environ.get("DASHRANK_SHARED") or os.path.join(self.checkout, "../shared"))
        self.counts = {"passed": 0, "failed": 0, "skipped": 0}

    def env(self, scratch):
        env = {k: v for k, v in os.environ.items() if k not in ("CARGO_TARGET_DIR", "DASHRANK_SHARED")}
        env["PATH"] = os.path.join(scratch.repo, "target", "release") + os.pathsep + env.get("PATH", "")
        return env

    def result(self, block, what, status, seconds=None, detail=""):
        took = f" ({seconds:.1f} s)" if seconds is not None else ""
        print(f"{what:<5} {block.where()} [{block.lang}]{took}{': ' + detail if detail else ''}", flush=True)
        self.counts[status] += 1

    def run_file(self, path):
        blocks = parse(path)
        scratch = Scratch(self.checkout, self.scratch_root, self.shared, self.target)
        scratch.reset()
        shell = Shell(scratch.repo, self.env(scratch))
        last = None  # (block, status, output) of the last command block run
        for b in blocks:
            last = self.run_block(b, blocks, scratch, shell, last)

    def run_block(self, b, blocks, scratch, shell, last):
        if b.kind == "output":
            return self.compare(b, last)
        if b.kind == "file":
            with open(os.path.join(shell.cwd, b.arg), "w") as f:
                f.write(b.text)
            self.result(b, "FILE", "passed", detail=f"written to {b.arg}")
            return last
        if b.lang == "yaml" and "steps:" in b.text:
            return self.run_workflow(b, scratch, shell) or last
        if b.lang not in COMMAND_LANGS:
            return last
        if b.kind == "skip":
            self.result(b, "SKIP", "skipped", detail=b.arg)
            return None
        slurm = b.kind == "needs" and b.arg == "slurm"
        if slurm and not self.args.slurm:
            self.result(b, "SKIP", "skipped", detail="needs a Slurm cluster: scripts/slurm-test.sh runs it")
            return None
        if self.args.slurm and not slurm:
            return None  # --slurm runs only the Slurm blocks (and writes the files they use)
        measurer = os.path.join(scratch.repo, "target", "taco", "dashrank-taco-measure")
        if b.kind == "needs" and b.arg == "taco" and not os.access(measurer, os.X_OK):
            self.result(b, "SKIP", "skipped", detail="needs stock TACO: target/taco/dashrank-taco-measure "
                        "is not built (bash scripts/taco-tools.sh; ../shared/vendor)")
            return None
        status, out, took = shell.run(b.text, scratch.root + "-state")
        want = int(b.arg) if b.kind == "exit" else 0
        if status != want:
            self.result(b, "FAIL", "failed", took, f"exit status {status}, expected {want}\n" + indent(out))
            return None
        follows = blocks.index(b) + 1 < len(blocks) and blocks[blocks.index(b) + 1].kind == "output"
        if not follows:
            self.result(b, "ok", "passed", took)
        return (b, took, out)

    def compare(self, b, last):
        if last is None and self.args.slurm:
            return None  # its command block is not one of the Slurm blocks
        if last is None:
            self.result(b, "SKIP", "skipped", detail="the command block before it did not run")
            return None
        block, took, out = last
        if output_matches(b.text, out):
            self.result(block, "ok", "passed", took, f"output as shown at line {b.line}")
        else:
            self.result(block, "FAIL", "failed", took,
                        f"output differs from the one shown at line {b.line}:\n{indent(out)}")
        return None

    def run_workflow(self, b, scratch, shell):
        if b.kind == "skip" or self.args.slurm:
            if b.kind == "skip":
                self.result(b, "SKIP", "skipped", detail=b.arg)
            return None
        import yaml
        start = time.time()
        wf = Workflow(yaml.safe_load(b.text), scratch, shell.env, print)
        ok = wf.run()
        scratch.reset()  # the jobs' workspace was the scratch copy: the next block gets a fresh one
        shell.cwd = scratch.repo
        self.result(b, "ok" if ok else "FAIL", "passed" if ok else "failed", time.time() - start, "CI workflow")
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--slurm", action="store_true", help="run the blocks marked 'needs slurm' (only those)")
    ap.add_argument("--scratch", help="scratch directory, outside the cargo target directory "
                    "(default: ~/.cache/dashrank/doc-blocks-<hash of the checkout's path>)")
    args = ap.parse_args()
    errors = [e for f in args.files for e in check_annotations(parse(f))]
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(1)
    runner = Runner(args)
    for f in args.files:
        runner.run_file(os.path.abspath(f))
    c = runner.counts
    print(f"doc blocks: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
    sys.exit(1 if c["failed"] else 0)


if __name__ == "__main__":
    main()
