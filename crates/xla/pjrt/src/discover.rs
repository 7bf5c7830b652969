//! Finding plugins by name, the way JAX does: `PJRT_NAMES_AND_LIBRARY_PATHS`, and the
//! plugin wheels installed in the project's virtualenv.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::Error;

/// The variable JAX reads plugins from: `name:path,name2:path2`.
pub const PLUGINS_VAR: &str = "PJRT_NAMES_AND_LIBRARY_PATHS";

/// Where a plugin was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Named in [`PLUGINS_VAR`].
    EnvVar,
    /// A wheel in the virtualenv's `site-packages`.
    Venv,
}

/// A plugin found by [`discover`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The name `pjrt:NAME` selects it by.
    pub name: String,
    /// The plugin file.
    pub path: PathBuf,
    /// Where it was found.
    pub origin: Origin,
}

/// The plugin file for `pjrt:NAME` (the `pjrt:` prefix is optional). A path (it contains
/// `/` or ends in `.so`) is that file; a name is looked up in [`PLUGINS_VAR`], then (`cpu`:
/// the `xla-cpu-pjrt` wheel first) among the wheels of `workspace`'s `.venv`.
pub fn resolve(name: &str, workspace: Option<&Path>) -> Result<PathBuf, Error> {
    resolve_with(name, workspace, std::env::var(PLUGINS_VAR).ok().as_deref())
}

/// Every plugin [`resolve`] can find by name: [`PLUGINS_VAR`]'s, then the virtualenv's.
pub fn discover(workspace: Option<&Path>) -> Vec<Found> {
    discover_with(workspace, std::env::var(PLUGINS_VAR).ok().as_deref())
}

fn resolve_with(name: &str, workspace: Option<&Path>, var: Option<&str>) -> Result<PathBuf, Error> {
    let name = name.strip_prefix("pjrt:").unwrap_or(name);
    if name.contains('/') || name.ends_with(".so") {
        return Ok(PathBuf::from(name));
    }
    if let Some(found) = from_var(var).into_iter().find(|f| f.name == name) {
        return Ok(found.path);
    }
    if let Some(workspace) = workspace {
        if name == "cpu" {
            for site in site_packages(workspace) {
                let wheel = site.join("xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so");
                if wheel.is_file() {
                    return Ok(wheel);
                }
            }
        }
        if let Some(found) = from_venv(workspace).into_iter().find(|f| f.name == name) {
            return Ok(found.path);
        }
    }
    Err(Error::UnknownPlugin {
        name: name.to_string(),
        found: discover_with(workspace, var),
    })
}

fn discover_with(workspace: Option<&Path>, var: Option<&str>) -> Vec<Found> {
    let mut found = from_var(var);
    found.extend(workspace.map(from_venv).unwrap_or_default());
    found
}

/// The variable's plugins, as JAX parses it: entries split at `,`, each `name:path`
/// (malformed entries skipped); a name given twice keeps its last path.
fn from_var(var: Option<&str>) -> Vec<Found> {
    let mut found: Vec<Found> = Vec::new();
    for entry in var.unwrap_or("").split(',') {
        let mut parts = entry.split(':');
        let (Some(name), Some(path), None) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        found.retain(|f| f.name != name);
        found.push(Found {
            name: name.to_string(),
            path: PathBuf::from(path),
            origin: Origin::EnvVar,
        });
    }
    found
}

/// `workspace/.venv/lib/python*/site-packages`, where set-up installs Python packages.
pub fn site_packages(workspace: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = entries(&workspace.join(".venv/lib"))
        .into_iter()
        .filter(|p| file_name(p).starts_with("python"))
        .map(|p| p.join("site-packages"))
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// Shared libraries exporting `GetPjrtApi` in `site-packages/*/` and `site-packages/*/*/`
/// (e.g. `xla_plugins/xla_cpu_pjrt/`, `jax_plugins/xla_cuda12/`), named after their
/// directory; the `xla-cpu-pjrt` wheel's is `cpu`.
fn from_venv(workspace: &Path) -> Vec<Found> {
    let mut found = Vec::new();
    for site in site_packages(workspace) {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for package in entries(&site).into_iter().filter(|p| p.is_dir()) {
            let name = file_name(&package);
            if name.ends_with(".dist-info") || name == "__pycache__" {
                continue;
            }
            dirs.extend(entries(&package).into_iter().filter(|p| p.is_dir()));
            dirs.push(package);
        }
        dirs.sort();
        for dir in dirs {
            let name = match file_name(&dir) {
                "xla_cpu_pjrt" => "cpu".to_string(),
                other => other.to_string(),
            };
            let mut libraries: Vec<PathBuf> = entries(&dir)
                .into_iter()
                .filter(|p| {
                    let f = file_name(p);
                    (f.ends_with(".so") || f.contains(".so.")) && p.is_file()
                })
                .filter(|p| exports(p, b"GetPjrtApi").unwrap_or(false))
                .collect();
            libraries.sort();
            found.extend(libraries.into_iter().map(|path| Found {
                name: name.clone(),
                path,
                origin: Origin::Venv,
            }));
        }
    }
    found
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(read) => read.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => Vec::new(),
    }
}

fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// Whether a 64-bit little-endian ELF file defines the dynamic symbol `name`, read from its
/// section headers and `.dynsym` without loading it (dlopen would run every library's
/// initializers). Uses the GNU hash table when there is one, so large libraries (libtorch)
/// cost a few small reads.
fn exports(path: &Path, name: &[u8]) -> io::Result<bool> {
    const SHT_DYNSYM: u32 = 11;
    const SHT_GNU_HASH: u32 = 0x6fff_fff6;
    let file = File::open(path)?;
    let read = |offset: u64, len: u64| -> io::Result<Vec<u8>> {
        let mut buf = vec![0; usize::try_from(len).map_err(io::Error::other)?];
        file.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    };
    let u16_at = |b: &[u8], i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());

    let header = read(0, 64)?;
    if &header[..4] != b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return Ok(false);
    }
    let (shoff, shentsize, shnum) = (
        u64_at(&header, 0x28),
        u64::from(u16_at(&header, 0x3a)),
        u64::from(u16_at(&header, 0x3c)),
    );
    if shentsize < 64 {
        return Ok(false);
    }
    let sections = read(shoff, shentsize * shnum)?;
    // (type, offset, size, link) of section i.
    let section = |i: u64| -> Option<(u32, u64, u64, u32)> {
        let at = usize::try_from(i * shentsize).ok()?;
        let s = sections.get(at..at + 64)?;
        Some((
            u32_at(s, 4),
            u64_at(s, 0x18),
            u64_at(s, 0x20),
            u32_at(s, 0x28),
        ))
    };
    let find = |ty: u32| (0..shnum).find_map(|i| section(i).filter(|s| s.0 == ty));
    let Some((_, syms, syms_size, strtab)) = find(SHT_DYNSYM) else {
        return Ok(false);
    };
    let Some((_, strs, strs_size, _)) = section(u64::from(strtab)) else {
        return Ok(false);
    };
    let count = syms_size / 24;
    // Whether symbol i (an Elf64_Sym: name u32, info, other, shndx u16, ...) is `name`
    // and defined here (section index not SHN_UNDEF).
    let is_defined_name = |i: u64| -> io::Result<bool> {
        if i >= count {
            return Ok(false);
        }
        let sym = read(syms + i * 24, 24)?;
        let at = u64::from(u32_at(&sym, 0));
        if u16_at(&sym, 6) == 0 || at + name.len() as u64 + 1 > strs_size {
            return Ok(false);
        }
        let s = read(strs + at, name.len() as u64 + 1)?;
        Ok(&s[..name.len()] == name && s[name.len()] == 0)
    };
    let Some((_, table, _, _)) = find(SHT_GNU_HASH) else {
        return (0..count).try_fold(false, |hit, i| Ok(hit || is_defined_name(i)?));
    };
    // The GNU hash table: nbuckets, symoffset, bloom_size, bloom_shift, the bloom words
    // (u64), the buckets (u32), then one chain word (u32) per symbol from symoffset on.
    let hash = name.iter().fold(5381u32, |h, &c| {
        h.wrapping_mul(33).wrapping_add(u32::from(c))
    });
    let head = read(table, 16)?;
    let (nbuckets, symoffset, bloom_size) = (u32_at(&head, 0), u32_at(&head, 4), u32_at(&head, 8));
    if nbuckets == 0 {
        return Ok(false);
    }
    let buckets = table + 16 + u64::from(bloom_size) * 8;
    let chains = buckets + u64::from(nbuckets) * 4;
    let mut i = u32_at(&read(buckets + u64::from(hash % nbuckets) * 4, 4)?, 0);
    if i < symoffset {
        return Ok(false);
    }
    while u64::from(i) < count {
        let chain = u32_at(&read(chains + u64::from(i - symoffset) * 4, 4)?, 0);
        if chain | 1 == hash | 1 && is_defined_name(u64::from(i))? {
            return Ok(true);
        }
        if chain & 1 == 1 {
            break;
        }
        i += 1;
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_is_read_as_jax_reads_it() {
        let found = from_var(Some("a:/x/a.so,bad,b:/x/b.so,a:/y/a.so,c:d:e"));
        let pairs: Vec<(&str, &Path)> = found
            .iter()
            .map(|f| (f.name.as_str(), f.path.as_path()))
            .collect();
        assert_eq!(
            pairs,
            [("b", Path::new("/x/b.so")), ("a", Path::new("/y/a.so"))]
        );
        assert!(from_var(None).is_empty());
        assert!(from_var(Some("")).is_empty());
    }

    #[test]
    fn names_paths_and_unknown_names() {
        let var = Some("mine:/opt/mine.so");
        let ws = Path::new("/nonexistent");
        let r = |name| resolve_with(name, Some(ws), var);
        assert_eq!(r("pjrt:mine").unwrap(), Path::new("/opt/mine.so"));
        assert_eq!(r("mine").unwrap(), Path::new("/opt/mine.so"));
        assert_eq!(r("./x.so").unwrap(), Path::new("./x.so"));
        assert_eq!(r("libfoo.so").unwrap(), Path::new("libfoo.so"));
        assert_eq!(r("pjrt:/a/b").unwrap(), Path::new("/a/b"));
        let err = r("pjrt:tpu").unwrap_err().to_string();
        assert!(err.contains("no PJRT plugin named `tpu`"), "{err}");
        assert!(err.contains("mine (/opt/mine.so)"), "{err}");
        let err = resolve_with("cpu", None, None).unwrap_err().to_string();
        assert!(err.ends_with("found: none"), "{err}");
    }

    #[test]
    fn elf_exports_are_read_without_loading() {
        // libm exports `cos` and is no plugin; a text file is no ELF file.
        let libm = Path::new("/lib/x86_64-linux-gnu/libm.so.6");
        if libm.exists() {
            assert!(exports(libm, b"cos").unwrap());
            assert!(!exports(libm, b"GetPjrtApi").unwrap());
        }
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("x.so");
        std::fs::write(&text, "not a library").unwrap();
        assert!(exports(&text, b"GetPjrtApi").is_err());
    }
}
