//! Repro directories on disk: the graph as text and its inputs, written atomically.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use graphbug_aten::io::{order_tensors, read_tensors, write_tensors};
use graphbug_ir::{parse_graph, print_graph, Graph};
use tch::Tensor;

use crate::error::{ReproError, Result};

/// The graph file of a repro directory.
pub const GRAPH_FILE: &str = "graph.py";
/// The inputs file of a repro directory (keys are the placeholder names).
pub const INPUTS_FILE: &str = "inputs.safetensors";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes a file atomically: to a temporary sibling first, then renamed into place.
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = sibling(path, "tmp");
    std::fs::write(&tmp, bytes).map_err(|e| ReproError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ReproError::io(path, e)
    })
}

/// A hidden, unique sibling path of `path` with a tag.
fn sibling(path: &Path, tag: &str) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.{tag}.{}.{n}", std::process::id()))
}

/// Fills a fresh directory with `fill`, then makes `link` (a symlink) point at it in one
/// atomic rename, so readers of `link` see the old directory or the new one, never a mix.
/// The directory `link` pointed at before is removed. A real directory at `link` is
/// replaced only when it is empty.
pub fn replace_dir_atomically(link: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let parent = link
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| ReproError::io(parent, e))?;
    let dir = sibling(link, "v");
    std::fs::create_dir(&dir).map_err(|e| ReproError::io(&dir, e))?;
    if let Err(e) = fill(&dir) {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    let old = match std::fs::symlink_metadata(link) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::read_link(link).ok().map(|t| parent.join(t))
        }
        Ok(m) if m.is_dir() => {
            std::fs::remove_dir(link).map_err(|e| {
                ReproError::io(
                    link,
                    format!("exists and is not a graphbug repro link ({e})"),
                )
            })?;
            None
        }
        Ok(_) => return Err(ReproError::io(link, "exists and is not a directory")),
        Err(_) => None,
    };
    let tmp_link = sibling(link, "link");
    let target = dir.file_name().expect("sibling paths have a file name");
    std::os::unix::fs::symlink(target, &tmp_link).map_err(|e| ReproError::io(&tmp_link, e))?;
    std::fs::rename(&tmp_link, link).map_err(|e| ReproError::io(link, e))?;
    if let Some(old) = old {
        let _ = std::fs::remove_dir_all(old);
    }
    Ok(())
}

/// Writes a graph and its inputs (in placeholder order) into `dir`.
pub fn write_graph_and_inputs(dir: &Path, graph: &Graph, inputs: &[Tensor]) -> Result<()> {
    let names: Vec<String> = graph
        .placeholders()
        .iter()
        .map(|&i| graph.node(i).name.clone())
        .collect();
    if names.len() != inputs.len() {
        return Err(ReproError::Other(format!(
            "{} inputs for a graph with {} placeholders",
            inputs.len(),
            names.len()
        )));
    }
    let named: Vec<(String, Tensor)> = names
        .into_iter()
        .zip(inputs.iter().map(Tensor::shallow_clone))
        .collect();
    write_file_atomically(&dir.join(GRAPH_FILE), print_graph(graph).as_bytes())?;
    write_tensors(&dir.join(INPUTS_FILE), &named)?;
    Ok(())
}

/// Reads the graph and inputs of a repro directory; errors name the missing or bad file.
pub fn read_graph_and_inputs(dir: &Path) -> Result<(Graph, Vec<Tensor>)> {
    let gpath = dir.join(GRAPH_FILE);
    let text = std::fs::read_to_string(&gpath).map_err(|e| ReproError::io(&gpath, e))?;
    let graph = parse_graph(&text).map_err(|e| ReproError::io(&gpath, e))?;
    let ipath = dir.join(INPUTS_FILE);
    let named = read_tensors(&ipath)?;
    let names: Vec<String> = graph
        .placeholders()
        .iter()
        .map(|&i| graph.node(i).name.clone())
        .collect();
    let inputs = order_tensors(named, &names, "inputs").map_err(|e| ReproError::io(&ipath, e))?;
    Ok((graph, inputs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_swapped_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let link = tmp.path().join("minified");
        for round in 0..3 {
            replace_dir_atomically(&link, |d| {
                std::fs::write(d.join("a"), format!("{round}"))
                    .map_err(|e| ReproError::io(d, e))?;
                std::fs::write(d.join("b"), format!("{round}")).map_err(|e| ReproError::io(d, e))
            })
            .unwrap();
            assert_eq!(
                std::fs::read_to_string(link.join("a")).unwrap(),
                round.to_string()
            );
            assert_eq!(
                std::fs::read_to_string(link.join("b")).unwrap(),
                round.to_string()
            );
        }
        // Only the live version and the link remain.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 2);
        // A failed fill leaves the old directory in place.
        let err = replace_dir_atomically(&link, |d| Err(ReproError::io(d, "boom")));
        assert!(err.is_err());
        assert_eq!(std::fs::read_to_string(link.join("a")).unwrap(), "2");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 2);
    }
}
