//! The conformance cases' safetensors files, by name: `graphbug-files`'s reader and
//! writer (no libtorch here: tensors stay host bytes), keyed for merging and renaming.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;

/// One tensor of a case file.
pub type RawTensor = graphbug_files::HostTensor;

/// Reads every tensor of a safetensors file, by name.
pub fn read(path: &Path) -> Result<BTreeMap<String, RawTensor>> {
    Ok(graphbug_files::read(path)?.into_iter().collect())
}

/// Writes tensors as a safetensors file (atomically; entries ordered by dtype, then name).
pub fn write(path: &Path, tensors: &BTreeMap<String, RawTensor>) -> Result<()> {
    let entries: Vec<(&str, RawTensor)> = tensors
        .iter()
        .map(|(name, t)| (name.as_str(), t.clone()))
        .collect();
    Ok(graphbug_files::write(path, &entries)?)
}
