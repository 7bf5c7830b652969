//! Reference values: what one eager run of the original graph computed, node by node,
//! kept in memory or spilled to disk and loaded on demand.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use graphbug_aten::dynamic;
use graphbug_aten::io::{read_tensors, write_tensors};
use graphbug_aten::{Interpreter, RtValue};
use graphbug_ir::{Device, Graph, NodeKind};
use graphbug_minifier::Origin;
use tch::Tensor;

use crate::error::{ReproError, Result};

enum Store {
    Memory(HashMap<u32, Tensor>),
    /// One .safetensors file per node in this directory.
    Disk(PathBuf),
}

/// The original graph's inputs and every node's value from one eager run.
pub struct ReferenceValues {
    inputs: Vec<Tensor>,
    keys: HashMap<Origin, u64>,
    constants: HashMap<String, Tensor>,
    store: Store,
    device: Device,
    tdev: tch::Device,
}

impl ReferenceValues {
    /// The same values, sharing their tensors' storage (one copy for each worker's
    /// checker; values are only ever read).
    pub fn shallow_clone(&self) -> ReferenceValues {
        ReferenceValues {
            inputs: self.inputs.iter().map(Tensor::shallow_clone).collect(),
            keys: self.keys.clone(),
            constants: self
                .constants
                .iter()
                .map(|(k, t)| (k.clone(), t.shallow_clone()))
                .collect(),
            store: match &self.store {
                Store::Memory(m) => {
                    Store::Memory(m.iter().map(|(k, t)| (*k, t.shallow_clone())).collect())
                }
                Store::Disk(dir) => Store::Disk(dir.clone()),
            },
            device: self.device.clone(),
            tdev: self.tdev,
        }
    }

    /// Runs `graph` eagerly on copies of `inputs` and records each node's value (a copy,
    /// so later in-place ops cannot change it). With `offload`, values go to one
    /// .safetensors file each in that directory instead of memory.
    ///
    /// A graph with symbolic sizes or dynamo-level calls runs in its runnable form (see
    /// [`graphbug_aten::dynamic::runnable`]), its symbols bound from `inputs`; values are
    /// recorded under the ids of `graph`'s nodes of the same names.
    pub fn record(
        graph: &Graph,
        inputs: &[Tensor],
        constants: &HashMap<String, Tensor>,
        device: &Device,
        offload: Option<&Path>,
    ) -> Result<Self> {
        let tdev = graphbug_aten::dtype::tch_device(device)?;
        let originals: Vec<Tensor> = inputs.iter().map(Tensor::copy).collect();
        let run_inputs: Vec<Tensor> = inputs.iter().map(Tensor::copy).collect();
        let runnable = if dynamic::needs_runnable_form(graph) {
            let bindings = dynamic::bind_positional(graph, inputs).map_err(ReproError::Other)?;
            Some(dynamic::runnable(graph, &bindings).map_err(ReproError::Other)?)
        } else {
            None
        };
        // The id in `graph` of each node of the graph that runs.
        let id_in_graph: Option<Vec<Option<u32>>> = runnable.as_ref().map(|run| {
            let ids: HashMap<&str, u32> = graph
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.name.as_str(), i as u32))
                .collect();
            run.nodes
                .iter()
                .map(|n| ids.get(n.name.as_str()).copied())
                .collect()
        });
        let graph = runnable.as_ref().unwrap_or(graph);
        let interp = Interpreter::new(graph, device, constants)?;
        let mut memory = HashMap::new();
        if let Some(dir) = offload {
            std::fs::create_dir_all(dir).map_err(|e| ReproError::io(dir, e))?;
        }
        let mut failure = None;
        let mut keys: HashMap<Origin, u64> = originals
            .iter()
            .enumerate()
            .map(|(k, t)| (Origin::Input(k), fingerprint(t)))
            .collect();
        interp.run_observed(&run_inputs, &mut |i, v| {
            let node = &graph.nodes[i];
            if node.is_placeholder() {
                return Ok(());
            }
            let i = match &id_in_graph {
                Some(ids) => match ids[i] {
                    Some(id) => id as usize,
                    // A step a dynamo-level call was lowered to: no node of `graph`.
                    None => return Ok(()),
                },
                None => i,
            };
            if let RtValue::Tensor(t) = v {
                keys.insert(Origin::Node(i as u32), fingerprint(t));
                match offload {
                    Some(dir) => {
                        let file = dir.join(format!("{i}.safetensors"));
                        if let Err(e) = write_tensors(
                            &file,
                            &[("value".to_string(), t.to_device(tch::Device::Cpu))],
                        ) {
                            failure.get_or_insert(e.to_string());
                        }
                    }
                    None => {
                        memory.insert(i as u32, t.copy());
                    }
                }
            }
            Ok(())
        })?;
        if let Some(f) = failure {
            return Err(ReproError::Other(format!("spilling reference values: {f}")));
        }
        Ok(ReferenceValues {
            inputs: originals,
            keys,
            constants: constants
                .iter()
                .map(|(k, t)| (k.clone(), t.copy()))
                .collect(),
            store: match offload {
                Some(dir) => Store::Disk(dir.to_path_buf()),
                None => Store::Memory(memory),
            },
            device: device.clone(),
            tdev,
        })
    }

    /// Fingerprints of every value (dtype, shape and bytes): equal values, equal keys.
    pub fn value_keys(&self) -> &HashMap<Origin, u64> {
        &self.keys
    }

    /// The device values are given on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The original graph's constants.
    pub fn constants(&self) -> &HashMap<String, Tensor> {
        &self.constants
    }

    /// A fresh copy of the value of `origin` (callers may mutate it).
    pub fn get(&self, origin: Origin) -> Result<Tensor> {
        match origin {
            Origin::Input(k) => self
                .inputs
                .get(k)
                .map(Tensor::copy)
                .ok_or_else(|| ReproError::Other(format!("the graph has no input {k}"))),
            Origin::Node(id) => match &self.store {
                Store::Memory(m) => m.get(&id).map(Tensor::copy).ok_or_else(|| missing(id)),
                Store::Disk(dir) => {
                    let file = dir.join(format!("{id}.safetensors"));
                    if !file.exists() {
                        return Err(missing(id));
                    }
                    let mut named = read_tensors(&file)?;
                    let (_, t) = named.pop().ok_or_else(|| missing(id))?;
                    Ok(t.to_device(self.tdev))
                }
            },
        }
    }

    /// Values for a candidate's inputs, and the constants its `self.<attr>` nodes read.
    pub fn candidate_inputs(
        &self,
        candidate: &graphbug_minifier::Candidate,
    ) -> Result<(Vec<Tensor>, HashMap<String, Tensor>)> {
        let inputs = candidate
            .inputs
            .iter()
            .map(|&o| self.get(o))
            .collect::<Result<Vec<_>>>()?;
        let constants = candidate
            .graph
            .nodes
            .iter()
            .filter_map(|n| match &n.kind {
                NodeKind::GetAttr { target } => self
                    .constants
                    .get(target)
                    .map(|t| (target.clone(), t.shallow_clone())),
                _ => None,
            })
            .collect();
        Ok((inputs, constants))
    }
}

fn missing(id: u32) -> ReproError {
    ReproError::Other(format!(
        "no reference value for node #{id} (it produced no single tensor)"
    ))
}

/// FNV-1a over a tensor's dtype, shape and bytes.
fn fingerprint(t: &Tensor) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    // uint16/32/64 have no tch kind: named by dtype, read as the signed kind of their width.
    let kind = t
        .f_kind()
        .map_or_else(|_| graphbug_aten::dtype::describe(t), |k| format!("{k:?}"));
    eat(format!("{kind}{:?}", t.size()).as_bytes());
    let bits = graphbug_aten::dtype::tensor_dtype(t)
        .and_then(|d| graphbug_aten::dtype::view_bits(t, graphbug_aten::dtype::bits_dtype(d)).ok())
        .unwrap_or_else(|| t.shallow_clone());
    let cpu = bits.to_device(tch::Device::Cpu).contiguous();
    let n = cpu.numel() * cpu.kind().elt_size_in_bytes();
    let mut buf = vec![0u8; n];
    cpu.copy_data_u8(&mut buf, cpu.numel());
    eat(&buf);
    h
}
