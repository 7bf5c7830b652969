//! Programs over several devices: XLA's replicas and partitions, the shardings a compiled
//! SPMD program gives its parameters and outputs (`xla.OpSharding`, read from the optimized
//! module the plugin returns), and host tensors split into the shards each device takes and
//! assembled back from the shards each returns.

use graphbug_files::HostTensor;

/// How many devices a program runs on: XLA's `num_replicas` and `num_partitions`
/// (`ExecutableBuildOptions`), the partitions SPMD-partitioned when there are several.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Partitioning {
    /// Copies of the program, each with its own data (`replica_count`).
    pub num_replicas: usize,
    /// Parts of one program, by its shardings (`num_partitions`).
    pub num_partitions: usize,
    /// Whether the program was lowered for Shardy, XLA's newer partitioner (its `sdy`
    /// shardings, as JAX lowers them), so that XLA partitions it with Shardy
    /// (`use_shardy_partitioner`) rather than GSPMD.
    pub shardy: bool,
}

impl Partitioning {
    /// One device: one replica, one partition.
    pub const ONE: Partitioning = Partitioning {
        num_replicas: 1,
        num_partitions: 1,
        shardy: false,
    };

    /// How many devices it takes.
    pub fn devices(self) -> usize {
        self.num_replicas * self.num_partitions
    }

    /// Whether XLA's SPMD partitioner splits the program (several partitions).
    pub fn spmd(self) -> bool {
        self.num_partitions > 1
    }
}

impl std::fmt::Display for Partitioning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} device{} ({} replica{} x {} partition{})",
            self.devices(),
            plural(self.devices()),
            self.num_replicas,
            plural(self.num_replicas),
            self.num_partitions,
            plural(self.num_partitions)
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// What a program is compiled with: its devices, and XLA's option overrides
/// (`CompileOptionsProto.env_option_overrides`: debug options such as
/// `xla_disable_hlo_passes` or `xla_cpu_enable_fast_math`, by name, as JAX's
/// `compiler_options` gives them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompileOptions {
    /// The devices.
    pub partitioning: Partitioning,
    /// The overrides, in order.
    pub overrides: Vec<(String, OptionOverride)>,
}

/// One option override's value (`xla.OptionOverrideProto`).
#[derive(Clone, Debug, PartialEq)]
pub enum OptionOverride {
    /// `string_field` (a list option takes a comma-separated list).
    String(String),
    /// `bool_field`.
    Bool(bool),
    /// `int_field`.
    Int(i64),
    /// `double_field`.
    Double(f64),
}

impl OptionOverride {
    /// The value `text` reads as, as JAX's Python values would be given: `true`/`false` a
    /// bool, an integer an int, another number a double, anything else a string.
    pub fn parse(text: &str) -> OptionOverride {
        match text {
            "true" | "True" => return OptionOverride::Bool(true),
            "false" | "False" => return OptionOverride::Bool(false),
            _ => {}
        }
        if let Ok(i) = text.parse::<i64>() {
            return OptionOverride::Int(i);
        }
        match text.parse::<f64>() {
            Ok(d) if text.contains(['.', 'e', 'E']) => OptionOverride::Double(d),
            _ => OptionOverride::String(text.to_string()),
        }
    }
}

impl Default for Partitioning {
    fn default() -> Partitioning {
        Partitioning::ONE
    }
}

/// Where the pieces of one array live (`xla.OpSharding`), for the arrays of an entry
/// computation's parameters and results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sharding {
    /// Every device holds all of it.
    Replicated,
    /// One device holds all of it (`{maximal device=N}`).
    Maximal(usize),
    /// Split into tiles (`{devices=[...]...}`): the tile grid over the array's dimensions,
    /// then its trailing dimensions that replicate a tile (`last_tile_dim_replicate`,
    /// `last_tile_dims={replicated, manual}`); `devices` is the grid's devices in row-major
    /// order.
    Tiled {
        /// The grid: tiles per array dimension, then the trailing replicating dimensions.
        grid: Vec<usize>,
        /// How many of `grid`'s dimensions are the array's.
        rank: usize,
        /// The device of each grid cell, row-major.
        devices: Vec<usize>,
    },
    /// Each device holds a part of its own choosing (`{manual}`), shaped as it is on
    /// each device.
    Manual,
}

impl Sharding {
    /// The piece of an array of dimensions `global` that `device` holds: a start and an
    /// end per dimension (a tile past the array's end is empty there); `None` when the
    /// device holds none of it.
    pub fn shard_of(&self, device: usize, global: &[usize]) -> Option<Vec<(usize, usize)>> {
        let whole = || global.iter().map(|&d| (0, d)).collect();
        match self {
            Sharding::Replicated | Sharding::Manual => Some(whole()),
            Sharding::Maximal(d) => (*d == device).then(whole),
            Sharding::Tiled {
                grid,
                rank,
                devices,
            } => {
                let cell = devices.iter().position(|&d| d == device)?;
                let mut index = vec![0; grid.len()];
                let mut rest = cell;
                for (k, &n) in grid.iter().enumerate().rev() {
                    index[k] = rest % n;
                    rest /= n;
                }
                Some(
                    global
                        .iter()
                        .enumerate()
                        .map(|(k, &size)| {
                            let tiles = if k < *rank { grid[k] } else { 1 };
                            let step = size.div_ceil(tiles.max(1));
                            let start = (index.get(k).copied().unwrap_or(0) * step).min(size);
                            (start, (start + step).min(size))
                        })
                        .collect(),
                )
            }
        }
    }

    /// The dimensions of the piece each device holds of an array of dimensions `global`:
    /// a tile is as large as the largest (XLA pads the last ones).
    pub fn shard_dims(&self, global: &[usize]) -> Vec<usize> {
        match self {
            Sharding::Tiled { grid, rank, .. } => global
                .iter()
                .enumerate()
                .map(|(k, &size)| size.div_ceil(if k < *rank { grid[k].max(1) } else { 1 }))
                .collect(),
            _ => global.to_vec(),
        }
    }

    /// XLA's text for it: `{replicated}`, `{maximal device=1}`, `{devices=[2,1,2]0,1,2,3
    /// last_tile_dim_replicate}`, `{manual}`.
    pub fn to_text(&self) -> String {
        match self {
            Sharding::Replicated => "{replicated}".into(),
            Sharding::Maximal(d) => format!("{{maximal device={d}}}"),
            Sharding::Manual => "{manual}".into(),
            Sharding::Tiled {
                grid,
                rank,
                devices,
            } => {
                let list = |v: &[usize]| {
                    v.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let tail = match grid.len() - rank {
                    0 => String::new(),
                    _ => " last_tile_dim_replicate".into(),
                };
                format!("{{devices=[{}]{}{tail}}}", list(grid), list(devices))
            }
        }
    }
}

/// The piece of `tensor` that `device` holds under `sharding`, padded with zeros to the
/// dimensions every device's piece has (as XLA pads uneven tiles).
pub fn split(tensor: &HostTensor, sharding: &Sharding, device: usize) -> HostTensor {
    let dims = sharding.shard_dims(&tensor.shape);
    let item = tensor.dtype.itemsize();
    let mut data = vec![0u8; dims.iter().product::<usize>() * item];
    if let Some(ranges) = sharding.shard_of(device, &tensor.shape) {
        for_each_index(&ranges, |index| {
            let g = flat(index, &tensor.shape, None) * item;
            let s = flat(index, &dims, Some(&ranges)) * item;
            data[s..s + item].copy_from_slice(&tensor.data[g..g + item]);
        });
    }
    HostTensor {
        dtype: tensor.dtype,
        shape: dims,
        data,
        strides: None,
    }
}

/// Where devices disagree about a piece of an array several of them hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    /// The device whose copy is taken.
    pub first: usize,
    /// A device whose copy differs from it.
    pub other: usize,
    /// How many elements differ.
    pub elements: usize,
}

/// The array of dimensions `global` that `shards` (one per device, each the device's
/// number in `sharding` and what it returned) make under `sharding`: each piece from the
/// first device that holds it. Devices are named by their place in `shards`.
/// Every other copy of a piece must be the same bytes, or the devices disagree (the first
/// disagreement is returned beside the array). An error when a shard's dimensions are not
/// the sharding's, or no device holds some piece.
pub fn assemble(
    shards: &[(usize, HostTensor)],
    sharding: &Sharding,
    global: &[usize],
) -> Result<(HostTensor, Option<Disagreement>), String> {
    let (_, first) = shards.first().ok_or("no device returned the array")?;
    let dtype = first.dtype;
    let item = dtype.itemsize();
    let dims = sharding.shard_dims(global);
    let mut data = vec![0u8; global.iter().product::<usize>() * item];
    let mut holder: Vec<Option<usize>> = vec![None; global.iter().product()];
    let mut disagreement = None;
    for (device, (number, shard)) in shards.iter().enumerate() {
        if shard.dtype != dtype || shard.shape != dims {
            return Err(format!(
                "device {device} returned {}{:?} where {} {:?} of {}{global:?} was expected",
                shard.dtype.short_name(),
                shard.shape,
                sharding.to_text(),
                dims,
                dtype.short_name()
            ));
        }
        let Some(ranges) = sharding.shard_of(*number, global) else {
            continue;
        };
        // Element by element: which device holds each element first, and whether this
        // one agrees with it.
        let mut differs = 0;
        let mut first_holder = None;
        for_each_index(&ranges, |index| {
            let g = flat(index, global, None);
            let s = flat(index, &dims, Some(&ranges));
            let (gs, ss) = (g * item, s * item);
            match holder[g] {
                None => {
                    holder[g] = Some(device);
                    data[gs..gs + item].copy_from_slice(&shard.data[ss..ss + item]);
                }
                Some(h) => {
                    if data[gs..gs + item] != shard.data[ss..ss + item] {
                        differs += 1;
                        first_holder.get_or_insert(h);
                    }
                }
            }
        });
        if differs > 0 && disagreement.is_none() {
            disagreement = Some(Disagreement {
                first: first_holder.unwrap_or(0),
                other: device,
                elements: differs,
            });
        }
    }
    if holder.iter().any(Option::is_none) {
        return Err(format!(
            "no device returned every piece of the array {}{global:?} ({})",
            dtype.short_name(),
            sharding.to_text()
        ));
    }
    let tensor = HostTensor {
        dtype,
        shape: global.to_vec(),
        data,
        strides: None,
    };
    Ok((tensor, disagreement))
}

/// The row-major offset of `index` in an array of dimensions `dims`, counted from each
/// range's start when `ranges` are given (the index within a shard).
fn flat(index: &[usize], dims: &[usize], ranges: Option<&[(usize, usize)]>) -> usize {
    index
        .iter()
        .zip(dims)
        .enumerate()
        .fold(0, |acc, (k, (&i, &d))| {
            let i = ranges.map_or(i, |r| i - r[k].0);
            acc * d + i
        })
}

/// Calls `f` with every index of the block `ranges`, row-major; never for an empty block.
fn for_each_index(ranges: &[(usize, usize)], mut f: impl FnMut(&[usize])) {
    if ranges.iter().any(|&(s, e)| s >= e) {
        return;
    }
    let mut index: Vec<usize> = ranges.iter().map(|r| r.0).collect();
    loop {
        f(&index);
        let mut k = ranges.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            index[k] += 1;
            if index[k] < ranges[k].1 {
                break;
            }
            index[k] = ranges[k].0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphbug_ir::Dtype;

    fn f32s(shape: &[usize], values: impl IntoIterator<Item = f32>) -> HostTensor {
        HostTensor {
            dtype: Dtype::Float32,
            shape: shape.to_vec(),
            data: values.into_iter().flat_map(f32::to_le_bytes).collect(),
            strides: None,
        }
    }

    fn values(t: &HostTensor) -> Vec<f32> {
        t.data
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    /// `{devices=[2,1,2]<=[4] last_tile_dim_replicate}`: rows over devices {0,1} and
    /// {2,3}, each half held twice.
    fn rows_replicated() -> Sharding {
        Sharding::Tiled {
            grid: vec![2, 1, 2],
            rank: 2,
            devices: vec![0, 1, 2, 3],
        }
    }

    #[test]
    fn tiles_split_by_rows_and_replicate_on_the_last_grid_dimension() {
        let t = f32s(&[4, 2], (0..8).map(|i| i as f32));
        let s = rows_replicated();
        assert_eq!(values(&split(&t, &s, 0)), [0., 1., 2., 3.]);
        assert_eq!(values(&split(&t, &s, 1)), [0., 1., 2., 3.]);
        assert_eq!(values(&split(&t, &s, 3)), [4., 5., 6., 7.]);
        let shards: Vec<(usize, HostTensor)> = (0..4).map(|d| (d, split(&t, &s, d))).collect();
        let (back, disagreement) = assemble(&shards, &s, &[4, 2]).unwrap();
        assert_eq!(back, t);
        assert_eq!(disagreement, None);
    }

    #[test]
    fn uneven_tiles_are_padded_and_columns_follow_the_device_order() {
        // 3 columns over 2 devices, device 1 holding the first tile.
        let s = Sharding::Tiled {
            grid: vec![1, 2],
            rank: 2,
            devices: vec![1, 0],
        };
        let t = f32s(&[1, 3], [1., 2., 3.]);
        assert_eq!(s.shard_dims(&[1, 3]), [1, 2]);
        assert_eq!(values(&split(&t, &s, 1)), [1., 2.]);
        assert_eq!(values(&split(&t, &s, 0)), [3., 0.]);
        let shards = vec![(0, split(&t, &s, 0)), (1, split(&t, &s, 1))];
        assert_eq!(assemble(&shards, &s, &[1, 3]).unwrap().0, t);
    }

    #[test]
    fn a_device_whose_copy_differs_is_named() {
        let t = f32s(&[4, 2], (0..8).map(|i| i as f32));
        let s = rows_replicated();
        let mut shards: Vec<(usize, HostTensor)> = (0..4).map(|d| (d, split(&t, &s, d))).collect();
        shards[3].1 = f32s(&[2, 2], [4., 5., 6., 9.]);
        let (_, disagreement) = assemble(&shards, &s, &[4, 2]).unwrap();
        assert_eq!(
            disagreement,
            Some(Disagreement {
                first: 2,
                other: 3,
                elements: 1
            })
        );
        // Replicated: every device holds all of it, and must agree.
        let mut copies = vec![(0, t.clone()), (0, t.clone())];
        copies[1].1 = f32s(&[4, 2], (0..8).map(|i| if i == 0 { 7. } else { i as f32 }));
        let (back, d) = assemble(&copies, &Sharding::Replicated, &[4, 2]).unwrap();
        assert_eq!(back, t);
        assert_eq!(d.map(|d| (d.first, d.other)), Some((0, 1)));
    }

    #[test]
    fn shards_of_the_wrong_shape_or_missing_pieces_are_errors() {
        let s = rows_replicated();
        let wrong: Vec<(usize, HostTensor)> = (0..4).map(|d| (d, f32s(&[4, 2], [0.; 8]))).collect();
        let err = assemble(&wrong, &s, &[4, 2]).unwrap_err();
        assert!(err.contains("device 0 returned f32[4, 2]"), "{err}");
        let maximal = Sharding::Maximal(5);
        let err = assemble(&[(0, f32s(&[2], [0., 0.]))], &maximal, &[2]).unwrap_err();
        assert!(err.contains("no device returned every piece"), "{err}");
        assert!(assemble(&[], &s, &[4, 2]).is_err());
    }

    #[test]
    fn partitionings_count_devices_and_print_as_xla_names_them() {
        let p = Partitioning {
            num_partitions: 4,
            ..Partitioning::ONE
        };
        assert_eq!(p.devices(), 4);
        assert!(p.spmd() && !Partitioning::ONE.spmd());
        assert_eq!(p.to_string(), "4 devices (1 replica x 4 partitions)");
        assert_eq!(
            rows_replicated().to_text(),
            "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"
        );
    }
}
