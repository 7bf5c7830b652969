//! `graphbug repro DIR share` of an XLA repro directory: `DIR/shared`, the repro with
//! nothing of its author's that the failure does not need, safe to send to a compiler's
//! vendor. The program is scrubbed ([`crate::share::Scrubbed`]: metadata and source
//! locations removed, the module, computations and instructions renamed); then every input
//! and constant is replaced by seeded random values wherever the failure survives that:
//! all at once first (one query), else each half of a group that it does not survive,
//! down to the single values it needs, which are kept.
//! The directory is written from the last query that reproduced, and `shared.json` says
//! what was removed, replaced and kept, and what of the original remains.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use graphbug_files::HostTensor;
use graphbug_flow::repro::ReproRequest;
use graphbug_ir::TensorMeta;
use graphbug_minifier::{BugIdentity, CheckKind, Signature, Verdict};
use serde::Serialize;

use super::backend_under_test;
use super::repro::{check_once, load, XlaRepro};
use crate::execute::XlaBackend;
use crate::program::{Kind, Program};
use crate::repro::{fill_dir, read_dir, XlaCase, XlaManifest};
use crate::share::Scrubbed;

/// The record of what a shared directory keeps of the original.
pub const SHARED_FILE: &str = "shared.json";

/// `shared.json`.
#[derive(Serialize)]
struct SharedRecord {
    /// What was removed from the program.
    removed: Vec<String>,
    /// The values replaced by seeded random ones.
    replaced: Vec<String>,
    /// The values kept as recorded, each with why.
    kept: Vec<Kept>,
    /// What of the original remains beside the computation's structure.
    remains: Vec<String>,
    /// The seed of the random values.
    seed: u64,
    /// The checks made.
    queries: usize,
}

/// A value kept as recorded.
#[derive(Serialize)]
struct Kept {
    value: String,
    why: String,
}

/// One input or constant of the program.
struct Value {
    /// `arg0` or a constant's new name.
    name: String,
    /// As the user is told: `arg0 (f32[4,8])`, `constant constant.3 (f32[8])`.
    shown: String,
    /// Its seeded random stand-in, or why it has none.
    random: Result<HostTensor, String>,
}

/// `repro DIR share` (see the module's doc): returns `DIR/shared`.
pub(super) fn share(repro: &XlaRepro, dir: &Path, req: &ReproRequest) -> Result<PathBuf> {
    let case = read_dir(dir).map_err(|e| anyhow!(e))?;
    let what = case.dir.display().to_string();
    let original = case.manifest.failure.clone().ok_or_else(|| {
        anyhow!("{what} records no failure (a capture): `repro DIR minify --backend ...` finds one, then share its minified directory")
    })?;
    let module = match &case.program {
        Program::Hlo { module, .. } => module,
        _ => bail!(
            "{what}: `share` scrubs HLO programs, and this one is {} (its locations, names and constants are not scrubbed yet); share HLO instead: JAX's `jax.jit(f).lower(...).as_text(dialect=\"hlo\")`, or the program XLA dumps as built (XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text)",
            case.manifest.form
        ),
    };
    let scrubbed = Scrubbed::of(module).map_err(|e| anyhow!("{what}: {e}"))?;
    let backend_name = renamed_backend(
        req.backend.as_deref().unwrap_or(&case.manifest.backend),
        &scrubbed.renamed,
    )?;
    let identity = BugIdentity::new(
        renamed_signature(&original, &scrubbed.renamed),
        req.check_str.as_deref(),
    )
    .map_err(|e| anyhow!("--check-str: {e}"))?;
    let kind = case.manifest.check.unwrap_or(CheckKind::Accuracy);
    let values = values(&case, &scrubbed, req.seed)?;
    let run = Query {
        repro,
        case: &case,
        scrubbed: &scrubbed,
        backend: &backend_name,
        kind,
        identity: &identity,
        req,
    };
    let mut queries = 0;
    // The program scrubbed, every value as recorded: the failure must survive the names.
    println!(
        "sharing {what}: {} removed; {} values ({} inputs, {} constants) to replace",
        scrubbed.removed.join(", "),
        values.len(),
        case.inputs.len(),
        values.len() - case.inputs.len()
    );
    let none = vec![false; values.len()];
    queries += 1;
    let mut best = run.check(&values, &none)?.ok_or_else(|| {
        anyhow!("{what}: the failure does not survive removing the program's names and metadata, so it cannot be shared this way")
    })?;
    // Replace what the failure survives: a group at once, else each half of it, down to
    // the values it needs (all at once first: one query when it needs none).
    let replaceable: Vec<usize> = (0..values.len())
        .filter(|&i| values[i].random.is_ok())
        .collect();
    let mut replaced = none;
    let mut groups = vec![replaceable];
    while let Some(group) = groups.pop() {
        if group.is_empty() {
            continue;
        }
        let mut trial = replaced.clone();
        for &i in &group {
            trial[i] = true;
        }
        queries += 1;
        if let Some(found) = run.check(&values, &trial)? {
            best = found;
            replaced = trial;
        } else if group.len() > 1 {
            let (first, second) = group.split_at(group.len() / 2);
            // The first half is tried first.
            groups.push(second.to_vec());
            groups.push(first.to_vec());
        }
    }
    let mut record = SharedRecord {
        removed: scrubbed.removed.clone(),
        replaced: Vec::new(),
        kept: Vec::new(),
        remains: scrubbed.remains.clone(),
        seed: req.seed,
        queries,
    };
    for (v, r) in values.iter().zip(&replaced) {
        match (&v.random, r) {
            (_, true) => record.replaced.push(v.shown.clone()),
            (Err(why), false) => record.kept.push(Kept {
                value: v.shown.clone(),
                why: why.clone(),
            }),
            (Ok(_), false) => record.kept.push(Kept {
                value: v.shown.clone(),
                why: "the failure does not reproduce with random values in its place".into(),
            }),
        }
    }
    let out = case.dir.join("shared");
    write_shared(&case, &best, &record, &out)?;
    println!(
        "shared repro written to {} ({} queries): {} values replaced, {} kept as recorded",
        graphbug_flow::repro::absolute(&out).display(),
        queries,
        record.replaced.len(),
        record.kept.len()
    );
    for k in &record.kept {
        println!("  kept: {}: {}", k.value, k.why);
    }
    println!(
        "what remains of the original: {}",
        out.join(SHARED_FILE).display()
    );
    Ok(out)
}

/// What one check of a candidate ran, when the failure survived it.
struct Found {
    text: String,
    program: Program,
    backend: XlaBackend,
    inputs: Vec<HostTensor>,
    outputs: Vec<HostTensor>,
    signature: Signature,
}

/// What every check of a shared candidate shares.
struct Query<'a> {
    repro: &'a XlaRepro,
    case: &'a XlaCase,
    scrubbed: &'a Scrubbed,
    backend: &'a str,
    kind: CheckKind,
    identity: &'a BugIdentity,
    req: &'a ReproRequest,
}

impl Query<'_> {
    /// The scrubbed program with the values `replaced` taking their random stand-ins:
    /// what ran, when the failure survives.
    fn check(&self, values: &[Value], replaced: &[bool]) -> Result<Option<Found>> {
        let n = self.case.inputs.len();
        let inputs: Vec<HostTensor> = (0..n)
            .map(|i| match (&values[i].random, replaced[i]) {
                (Ok(r), true) => r.clone(),
                _ => self.case.inputs[i].clone(),
            })
            .collect();
        let constants: BTreeMap<String, HostTensor> = values[n..]
            .iter()
            .zip(&replaced[n..])
            .filter_map(|(v, r)| match (&v.random, r) {
                (Ok(t), true) => Some((v.name.clone(), t.clone())),
                _ => None,
            })
            .collect();
        let text = self.scrubbed.text(&constants).map_err(|e| anyhow!(e))?;
        let program = Program::read(text.as_bytes(), Kind::HloText)
            .map_err(|e| anyhow!("the scrubbed program: {e}"))?;
        let loaded = load(program.clone(), "the scrubbed program")?;
        let backend = backend_under_test(self.backend, &loaded.printer)?;
        let reference = self.repro.case_reference(self.case)?;
        let (verdict, recorded) = check_once(
            &loaded,
            &backend,
            self.kind,
            (&inputs, &reference),
            self.req,
        )?;
        match verdict {
            Verdict::Fails(sig) if self.identity.matches(&sig) => {
                let outputs = recorded
                    .outputs(loaded.printer.graph())
                    .map_err(|e| anyhow!(e))?;
                Ok(Some(Found {
                    text,
                    program,
                    backend,
                    inputs,
                    outputs,
                    signature: sig,
                }))
            }
            _ => Ok(None),
        }
    }
}

/// The program's inputs (`arg0`...) and its constants, each with its random stand-in.
fn values(case: &XlaCase, scrubbed: &Scrubbed, seed: u64) -> Result<Vec<Value>> {
    let params = case.program.parameters().map_err(|e| anyhow!(e))?;
    let metas: Vec<TensorMeta> = params.iter().map(|(_, m)| m.clone()).collect();
    // The inputs' stand-ins are one seeded draw, as `--seed` draws a program's inputs; each
    // constant's its own.
    let drawn = graphbug_files::random_tensors(&metas, seed);
    let mut values: Vec<Value> = metas
        .iter()
        .enumerate()
        .map(|(i, meta)| Value {
            name: format!("arg{i}"),
            shown: format!("input arg{i} ({meta})"),
            random: drawn.as_ref().map(|d| d[i].clone()).map_err(Clone::clone),
        })
        .collect();
    let random = |meta: &TensorMeta, k: u64| {
        graphbug_files::random_tensors(std::slice::from_ref(meta), seed.wrapping_add(k))
            .map(|mut t| t.remove(0))
    };
    for (k, (name, meta)) in scrubbed.constants().into_iter().enumerate() {
        let (shown, random) = match &meta {
            Some(m) => (format!("constant {name} ({m})"), random(m, 1 + k as u64)),
            None => (
                format!("constant {name}"),
                Err("graphbug draws no random values of its type".to_string()),
            ),
        };
        values.push(Value {
            name,
            shown,
            random,
        });
    }
    Ok(values)
}

/// The backend `name` with a fault pinned to an instruction by name pinned to its new name.
fn renamed_backend(name: &str, renamed: &BTreeMap<String, String>) -> Result<String> {
    let backend = XlaBackend::parse(name).map_err(|e| anyhow!(e))?;
    let Some(spec) = &backend.fault else {
        return Ok(name.to_string());
    };
    let Some(new) = spec.node.as_ref().and_then(|n| renamed.get(n)) else {
        return Ok(name.to_string());
    };
    let mut moved = spec.clone();
    moved.node = Some(new.clone());
    Ok(name.replacen(&spec.to_string(), &moved.to_string(), 1))
}

/// `sig` with the instructions it names renamed.
fn renamed_signature(sig: &Signature, renamed: &BTreeMap<String, String>) -> Signature {
    let rename = |n: &String| renamed.get(n).cloned().unwrap_or_else(|| n.clone());
    let mut message = String::with_capacity(sig.message.len());
    let mut word = String::new();
    let is_name = |c: char| c.is_alphanumeric() || c == '_' || c == '.' || c == '-';
    for c in sig.message.chars().chain(std::iter::once('\n')) {
        if is_name(c) {
            word.push(c);
            continue;
        }
        let bare = word.trim_end_matches('.');
        message.push_str(&rename(&bare.to_string()));
        message.push_str(&word[bare.len()..]);
        word.clear();
        message.push(c);
    }
    message.pop();
    Signature {
        message,
        culprits: sig.culprits.iter().map(rename).collect(),
        ..sig.clone()
    }
}

/// Writes the shared directory `out` from what last reproduced, with `shared.json`.
fn write_shared(case: &XlaCase, found: &Found, record: &SharedRecord, out: &Path) -> Result<()> {
    let mut manifest = XlaManifest {
        failure: Some(found.signature.clone()),
        captured_by: None,
        program: "program.hlo".into(),
        form: crate::repro::form_name(Kind::HloText).into(),
        backend: found.backend.name().to_string(),
        ..case.manifest.clone()
    };
    manifest.faulted_program = None;
    let json = serde_json::to_string_pretty(record).expect("the record serializes") + "\n";
    graphbug_files::replace_dir_atomically(
        out,
        |d| {
            fill_dir(
                d,
                &manifest,
                (found.text.as_bytes(), &found.program),
                &found.backend,
                &found.inputs,
                Some(&found.outputs),
                // Named as sent: a path would name the original's directory.
                Path::new("shared"),
            )?;
            let path = d.join(SHARED_FILE);
            graphbug_files::write_file_atomically(&path, json.as_bytes())
                .map_err(|e| format!("{}: {e}", path.display()))
        },
        |p, e| format!("{}: {e}", p.display()),
    )
    .map_err(|e| anyhow!(e))
}
