//! Repro directories on disk: the graph as text and its inputs, written atomically.

use std::path::Path;

use graphbug_aten::io::{order_tensors, read_tensors, write_tensors};
use graphbug_ir::{parse_graph, Graph};
use tch::Tensor;

use crate::error::{ReproError, Result};

/// The graph file of a repro directory.
pub const GRAPH_FILE: &str = "graph.py";

/// The class name of the module in a repro's graph, as in PyTorch's repro scripts.
pub const REPRO_CLASS: &str = "Repro";

/// A graph's text as repros hold it: the module is `class Repro`, whatever the source
/// named it (`<lambda>` for make_fx's graphs).
pub fn repro_text(graph: &Graph) -> String {
    graphbug_ir::print_graph_as(graph, REPRO_CLASS)
}
/// The inputs file of a repro directory (keys are the placeholder names).
pub const INPUTS_FILE: &str = "inputs.safetensors";

/// Writes a file atomically and durably (see [`graphbug_files::write_file_atomically`]):
/// a repro directory survives a power cut as its inputs file does.
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    graphbug_files::write_file_atomically(path, bytes).map_err(|e| ReproError::io(path, e))
}

/// Fills a fresh directory with `fill`, then makes `link` point at it atomically (see
/// [`graphbug_files::replace_dir_atomically`]).
pub fn replace_dir_atomically(link: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    graphbug_files::replace_dir_atomically(link, fill, ReproError::io)
}

/// Writes a graph and its inputs (in placeholder order) into `dir`.
pub fn write_graph_and_inputs(dir: &Path, graph: &Graph, inputs: &[Tensor]) -> Result<()> {
    let placeholders = graph.placeholders().len();
    if placeholders != inputs.len() {
        return Err(ReproError::Other(format!(
            "{} inputs for a graph with {placeholders} placeholders",
            inputs.len(),
        )));
    }
    write_file_atomically(&dir.join(GRAPH_FILE), repro_text(graph).as_bytes())?;
    write_tensors(&dir.join(INPUTS_FILE), &crate::case::named(graph, inputs))?;
    Ok(())
}

/// Reads the graph and inputs of a repro directory; errors name the missing or bad file.
pub fn read_graph_and_inputs(dir: &Path) -> Result<(Graph, Vec<Tensor>)> {
    let gpath = dir.join(GRAPH_FILE);
    let text = std::fs::read_to_string(&gpath).map_err(|e| ReproError::io(&gpath, e))?;
    let graph = parse_graph(&text).map_err(|e| ReproError::io(&gpath, e))?;
    let ipath = dir.join(INPUTS_FILE);
    let named = read_tensors(&ipath)?;
    let names: Vec<String> = graph.placeholder_names();
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
        // What a killed writer left (its process is gone) is removed by the next write;
        // a live process's is not, nor anything else hidden.
        // So is one whose writer is a zombie (an orphan nobody reaps), and one whose pid now
        // belongs to a process started after it was written.
        let dead = u32::MAX - 7;
        let mut zombie = std::process::Command::new("true").spawn().unwrap();
        while !std::fs::read_to_string(format!("/proc/{}/stat", zombie.id()))
            .map_or(true, |s| s.contains(") Z "))
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let reused = std::os::unix::process::parent_id();
        let left = [
            format!(".minified.v.{dead}.0"),
            format!(".minified.link.{dead}.3"),
            format!(".minified.tmp.{dead}.1"),
            format!(".minified.v.{}.5", zombie.id()),
            format!(".minified.tmp.{reused}.6"),
        ];
        std::fs::create_dir(tmp.path().join(&left[0])).unwrap();
        std::os::unix::fs::symlink("nowhere", tmp.path().join(&left[1])).unwrap();
        std::fs::write(tmp.path().join(&left[2]), "x").unwrap();
        std::fs::create_dir(tmp.path().join(&left[3])).unwrap();
        std::fs::File::create(tmp.path().join(&left[4]))
            .unwrap()
            .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000))
            .unwrap();
        // The version the link points at stays even though its writer is gone.
        let target = std::fs::read_link(&link).unwrap();
        assert!(tmp.path().join(&target).exists());
        let live = format!(".minified.v.{}.9", std::process::id());
        std::fs::create_dir(tmp.path().join(&live)).unwrap();
        std::fs::write(tmp.path().join(".other.v.1.0"), "x").unwrap();
        replace_dir_atomically(&link, |d| {
            std::fs::write(d.join("a"), "2").map_err(|e| ReproError::io(d, e))
        })
        .unwrap();
        for l in &left {
            assert!(
                !tmp.path().join(l).exists()
                    && std::fs::symlink_metadata(tmp.path().join(l)).is_err(),
                "{l}"
            );
        }
        zombie.wait().unwrap();
        assert!(tmp.path().join(&live).exists());
        assert!(tmp.path().join(".other.v.1.0").exists());
        std::fs::remove_dir(tmp.path().join(&live)).unwrap();
        std::fs::remove_file(tmp.path().join(".other.v.1.0")).unwrap();
        // A failed fill leaves the old directory in place.
        let err = replace_dir_atomically(&link, |d| Err(ReproError::io(d, "boom")));
        assert!(err.is_err());
        assert_eq!(std::fs::read_to_string(link.join("a")).unwrap(), "2");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 2);
    }
}
