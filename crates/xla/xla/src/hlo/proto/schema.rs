//! @generated: XLA's HLO schema (`HloModuleProto` and what it holds) as prost types. Do not edit.
//!
//! Made once, not at build time, by `crates/xla/xla/proto-gen` (prost-build 0.14.6, `compile_fds`,
//! well-known types compiled, comments off, maps as BTreeMap) from the serialized descriptors of
//! `google/protobuf/any.proto`,
//! `google/protobuf/duration.proto`,
//! `google/protobuf/timestamp.proto`,
//! `xla/xla_data.proto`,
//! `xla/service/metrics.proto`,
//! `xla/service/hlo.proto`,
//! as compiled into jaxlib 0.10.2 (jax commit 990e6a0b84138346e6a38785412f36356e0e5dc3),
//! read out of `libjax_common.so` by `proto-gen/extract.py`: the schema of the XLA that
//! is this crate's test oracle. It is newer than openxla/xla's
//! `xla/service/hlo.proto` at bfbc776e6233f97b5fb13bbc6022834f61646b62 (it adds
//! `HloInstructionProto.sparsity_config` = 98 and `backend_config_payload` = 99) and holds
//! every field of it. `MESSAGES` lists each message's fields for the walk that refuses
//! fields a proto holds and this schema lacks (prost would drop them).

#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// What a field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FieldKind {
    /// A number, string or bytes.
    Scalar,
    /// An enum (its full name).
    Enum(&'static str),
    /// A message (its full name).
    Msg(&'static str),
}

use FieldKind::{Enum, Msg, Scalar};

/// Every message of the schema: its full name and its fields (number, name, kind).
pub(crate) const MESSAGES: &[(&str, &[(u32, &str, FieldKind)])] = &[
    (
        "google.protobuf.Any",
        &[(1, "type_url", Scalar), (2, "value", Scalar)],
    ),
    (
        "google.protobuf.Duration",
        &[(1, "seconds", Scalar), (2, "nanos", Scalar)],
    ),
    (
        "google.protobuf.Timestamp",
        &[(1, "seconds", Scalar), (2, "nanos", Scalar)],
    ),
    (
        "xla.PaddingConfig",
        &[(
            1,
            "dimensions",
            Msg("xla.PaddingConfig.PaddingConfigDimension"),
        )],
    ),
    (
        "xla.PaddingConfig.PaddingConfigDimension",
        &[
            (1, "edge_padding_low", Scalar),
            (2, "edge_padding_high", Scalar),
            (3, "interior_padding", Scalar),
        ],
    ),
    ("xla.TileProto", &[(1, "dimensions", Scalar)]),
    (
        "xla.SplitConfigProto",
        &[(1, "dimension", Scalar), (2, "split_indices", Scalar)],
    ),
    (
        "xla.LayoutProto",
        &[
            (1, "minor_to_major", Scalar),
            (9, "dim_level_types", Enum("xla.DimLevelType")),
            (13, "dim_unique", Scalar),
            (14, "dim_ordered", Scalar),
            (6, "tiles", Msg("xla.TileProto")),
            (16, "tail_padding_alignment_in_elements", Scalar),
            (7, "element_size_in_bits", Scalar),
            (8, "memory_space", Scalar),
            (11, "index_primitive_type", Enum("xla.PrimitiveType")),
            (12, "pointer_primitive_type", Enum("xla.PrimitiveType")),
            (10, "physical_shape", Msg("xla.ShapeProto")),
            (15, "dynamic_shape_metadata_prefix_bytes", Scalar),
            (17, "split_configs", Msg("xla.SplitConfigProto")),
        ],
    ),
    (
        "xla.ShapeProto",
        &[
            (2, "element_type", Enum("xla.PrimitiveType")),
            (3, "dimensions", Scalar),
            (6, "is_dynamic_dimension", Scalar),
            (4, "tuple_shapes", Msg("xla.ShapeProto")),
            (5, "layout", Msg("xla.LayoutProto")),
        ],
    ),
    (
        "xla.ProgramShapeProto",
        &[
            (1, "parameters", Msg("xla.ShapeProto")),
            (2, "result", Msg("xla.ShapeProto")),
            (3, "parameter_names", Scalar),
        ],
    ),
    (
        "xla.ComputationStats",
        &[
            (1, "flop_count", Scalar),
            (2, "transcendental_count", Scalar),
        ],
    ),
    ("xla.Payload", &[(1, "value", Scalar), (2, "id", Scalar)]),
    (
        "xla.OpMetadata",
        &[
            (1, "op_type", Scalar),
            (2, "op_name", Scalar),
            (3, "source_file", Scalar),
            (4, "source_line", Scalar),
            (17, "source_end_line", Scalar),
            (18, "source_column", Scalar),
            (19, "source_end_column", Scalar),
            (5, "profile_type", Enum("xla.ProfileType")),
            (8, "size_of_generated_code_in_bytes", Scalar),
            (9, "size_of_memory_working_set_in_bytes", Scalar),
            (10, "profile_info", Msg("xla.OpMetadata.ProfileInfo")),
            (12, "deduplicated_name", Scalar),
            (15, "stack_frame_id", Scalar),
            (16, "scheduling_name", Scalar),
            (20, "metadata_payload", Msg("xla.Payload")),
        ],
    ),
    (
        "xla.OpMetadata.ProfileInfo",
        &[
            (1, "profile_type", Enum("xla.ProfileType")),
            (2, "relative_speedup", Scalar),
            (3, "profile_source", Enum("xla.ProfileSource")),
            (4, "compilation_event", Enum("xla.CompilationEvent")),
            (
                5,
                "profile_generation_strategy",
                Enum("xla.ProfileGenerationStrategy"),
            ),
        ],
    ),
    (
        "xla.ExecutionProfile",
        &[
            (1, "compilation_cache_hit", Scalar),
            (2, "compile_time_ms", Scalar),
            (3, "compute_cycle_count", Scalar),
            (4, "compute_time_ns", Scalar),
            (5, "compute_and_transfer_time_ns", Scalar),
            (6, "executable_size_in_bytes", Scalar),
            (7, "profile_cache_hit", Scalar),
            (8, "warmup_run_executed", Scalar),
        ],
    ),
    ("xla.ExecutionHandle", &[(1, "handle", Scalar)]),
    ("xla.GlobalDataHandle", &[(1, "handle", Scalar)]),
    (
        "xla.DeviceHandle",
        &[(1, "handle", Scalar), (2, "device_count", Scalar)],
    ),
    (
        "xla.ChannelHandle",
        &[
            (1, "handle", Scalar),
            (2, "type", Enum("xla.ChannelHandle.ChannelType")),
        ],
    ),
    (
        "xla.DeviceAssignmentProto",
        &[
            (1, "replica_count", Scalar),
            (2, "computation_count", Scalar),
            (
                3,
                "computation_devices",
                Msg("xla.DeviceAssignmentProto.ComputationDevice"),
            ),
        ],
    ),
    (
        "xla.DeviceAssignmentProto.ComputationDevice",
        &[(1, "replica_device_ids", Scalar)],
    ),
    (
        "xla.LiteralProto",
        &[
            (1, "shape", Msg("xla.ShapeProto")),
            (2, "preds", Scalar),
            (30, "s1s", Scalar),
            (26, "s2s", Scalar),
            (21, "s4s", Scalar),
            (15, "s8s", Scalar),
            (31, "u1s", Scalar),
            (27, "u2s", Scalar),
            (22, "u4s", Scalar),
            (3, "u8s", Scalar),
            (4, "s32s", Scalar),
            (5, "s64s", Scalar),
            (6, "u32s", Scalar),
            (7, "u64s", Scalar),
            (8, "f32s", Scalar),
            (9, "f64s", Scalar),
            (12, "c64s", Scalar),
            (18, "c128s", Scalar),
            (10, "tuple_literals", Msg("xla.LiteralProto")),
            (11, "f16s", Scalar),
            (13, "bf16s", Scalar),
            (16, "u16s", Scalar),
            (17, "s16s", Scalar),
            (32, "f4e2m1fns", Scalar),
            (29, "f8e3m4s", Scalar),
            (23, "f8e4m3b11fnuzs", Scalar),
            (20, "f8e4m3fns", Scalar),
            (25, "f8e4m3fnuzs", Scalar),
            (28, "f8e4m3s", Scalar),
            (24, "f8e5m2fnuzs", Scalar),
            (19, "f8e5m2s", Scalar),
            (33, "f8e8m0fnus", Scalar),
            (35, "f6e3m2fns", Scalar),
            (36, "f6e2m3fns", Scalar),
            (14, "sparse_indices", Scalar),
            (34, "dynamic_sizes", Scalar),
        ],
    ),
    (
        "xla.WindowDimension",
        &[
            (1, "size", Scalar),
            (2, "stride", Scalar),
            (3, "padding_low", Scalar),
            (4, "padding_high", Scalar),
            (5, "window_dilation", Scalar),
            (6, "base_dilation", Scalar),
            (7, "window_reversal", Scalar),
        ],
    ),
    (
        "xla.Window",
        &[(1, "dimensions", Msg("xla.WindowDimension"))],
    ),
    (
        "xla.GatherDimensionNumbers",
        &[
            (1, "offset_dims", Scalar),
            (2, "collapsed_slice_dims", Scalar),
            (3, "start_index_map", Scalar),
            (4, "index_vector_dim", Scalar),
            (5, "operand_batching_dims", Scalar),
            (6, "start_indices_batching_dims", Scalar),
        ],
    ),
    (
        "xla.ScatterDimensionNumbers",
        &[
            (1, "update_window_dims", Scalar),
            (2, "inserted_window_dims", Scalar),
            (3, "scatter_dims_to_operand_dims", Scalar),
            (4, "index_vector_dim", Scalar),
            (5, "input_batching_dims", Scalar),
            (6, "scatter_indices_batching_dims", Scalar),
        ],
    ),
    (
        "xla.ConvolutionDimensionNumbers",
        &[
            (7, "input_batch_dimension", Scalar),
            (8, "input_feature_dimension", Scalar),
            (11, "input_spatial_dimensions", Scalar),
            (3, "kernel_input_feature_dimension", Scalar),
            (4, "kernel_output_feature_dimension", Scalar),
            (6, "kernel_spatial_dimensions", Scalar),
            (9, "output_batch_dimension", Scalar),
            (10, "output_feature_dimension", Scalar),
            (12, "output_spatial_dimensions", Scalar),
        ],
    ),
    (
        "xla.SparsityConfig",
        &[
            (1, "lhs", Msg("xla.SparsityConfig.TensorSparsityConfig")),
            (2, "rhs", Msg("xla.SparsityConfig.TensorSparsityConfig")),
        ],
    ),
    (
        "xla.SparsityConfig.TensorSparsityConfig",
        &[
            (1, "num_non_zero", Scalar),
            (2, "block_size", Scalar),
            (3, "dimension", Scalar),
            (4, "stride", Scalar),
        ],
    ),
    (
        "xla.DotDimensionNumbers",
        &[
            (1, "lhs_contracting_dimensions", Scalar),
            (2, "rhs_contracting_dimensions", Scalar),
            (3, "lhs_batch_dimensions", Scalar),
            (4, "rhs_batch_dimensions", Scalar),
        ],
    ),
    (
        "xla.RaggedDotDimensionNumbers",
        &[
            (1, "dot_dimension_numbers", Msg("xla.DotDimensionNumbers")),
            (2, "lhs_ragged_dimensions", Scalar),
            (3, "rhs_group_dimensions", Scalar),
        ],
    ),
    (
        "xla.TriangularSolveOptions",
        &[
            (1, "left_side", Scalar),
            (2, "lower", Scalar),
            (3, "unit_diagonal", Scalar),
            (
                4,
                "transpose_a",
                Enum("xla.TriangularSolveOptions.Transpose"),
            ),
        ],
    ),
    ("xla.CholeskyOptions", &[(1, "lower", Scalar)]),
    (
        "xla.CubScanOptions",
        &[
            (1, "vector_length", Scalar),
            (2, "row_length", Scalar),
            (3, "column_length", Scalar),
            (4, "kind", Enum("xla.CubScanOptions.Kind")),
            (5, "is_reverse", Scalar),
        ],
    ),
    ("xla.SortOptions", &[(1, "descending", Scalar)]),
    (
        "xla.FrontendAttributes",
        &[(1, "map", Msg("xla.FrontendAttributes.MapEntry"))],
    ),
    (
        "xla.FrontendAttributes.MapEntry",
        &[(1, "key", Scalar), (2, "value", Scalar)],
    ),
    (
        "xla.Statistic",
        &[(1, "stat_name", Scalar), (2, "stat_val", Scalar)],
    ),
    (
        "xla.StatisticsViz",
        &[
            (1, "stat_index_to_visualize", Scalar),
            (2, "statistics", Msg("xla.Statistic")),
        ],
    ),
    (
        "xla.MeshProto",
        &[
            (1, "axes", Msg("xla.MeshProto.MeshAxis")),
            (2, "device_ids", Scalar),
            (3, "iota_transform", Msg("xla.MeshProto.IotaTransform")),
        ],
    ),
    (
        "xla.MeshProto.MeshAxis",
        &[(1, "name", Scalar), (2, "size", Scalar)],
    ),
    (
        "xla.MeshProto.IotaTransform",
        &[(1, "reshape_dims", Scalar), (2, "transpose_perm", Scalar)],
    ),
    (
        "xla.AxisRefProto",
        &[
            (1, "mesh_axis_index", Scalar),
            (2, "sub_axis_info", Msg("xla.AxisRefProto.SubAxis")),
        ],
    ),
    (
        "xla.AxisRefProto.SubAxis",
        &[(1, "pre_size", Scalar), (2, "size", Scalar)],
    ),
    (
        "xla.NamedShardingProto",
        &[
            (2, "mesh", Msg("xla.MeshProto")),
            (
                3,
                "dim_shardings",
                Msg("xla.NamedShardingProto.DimensionSharding"),
            ),
            (4, "replicated_axes", Msg("xla.AxisRefProto")),
            (5, "unreduced_axes", Msg("xla.AxisRefProto")),
            (7, "manual_axes", Msg("xla.AxisRefProto")),
            (6, "metadata", Msg("xla.OpMetadata")),
        ],
    ),
    (
        "xla.NamedShardingProto.DimensionSharding",
        &[
            (1, "axes", Msg("xla.AxisRefProto")),
            (2, "is_closed", Scalar),
        ],
    ),
    (
        "xla.OpSharding",
        &[
            (1, "type", Enum("xla.OpSharding.Type")),
            (2, "tile_shape", Msg("xla.ShapeProto")),
            (3, "tile_assignment_dimensions", Scalar),
            (4, "tile_assignment_devices", Scalar),
            (5, "tuple_shardings", Msg("xla.OpSharding")),
            (6, "replicate_on_last_tile_dim", Scalar),
            (7, "metadata", Msg("xla.OpMetadata")),
            (8, "last_tile_dims", Enum("xla.OpSharding.Type")),
            (9, "iota_reshape_dims", Scalar),
            (10, "iota_transpose_perm", Scalar),
            (11, "is_shard_group", Scalar),
            (12, "shard_group_id", Scalar),
            (
                13,
                "shard_group_type",
                Enum("xla.OpSharding.ShardGroupType"),
            ),
            (14, "named_sharding", Msg("xla.NamedShardingProto")),
        ],
    ),
    ("xla.ReplicaGroup", &[(1, "replica_ids", Scalar)]),
    (
        "xla.MeshAxesReplicaGroupListProto",
        &[
            (1, "mesh", Msg("xla.MeshProto")),
            (2, "axes", Msg("xla.AxisRefProto")),
        ],
    ),
    (
        "xla.IotaReplicaGroupListProto",
        &[
            (1, "num_replica_groups", Scalar),
            (2, "num_devices_per_group", Scalar),
            (3, "iota_reshape_dims", Scalar),
            (4, "iota_transpose_perm", Scalar),
        ],
    ),
    (
        "xla.CollectiveDeviceListProto",
        &[(1, "replica_groups", Msg("xla.ReplicaGroup"))],
    ),
    (
        "xla.SourceTarget",
        &[(1, "source", Scalar), (2, "target", Scalar)],
    ),
    (
        "xla.ResultAccuracy",
        &[
            (1, "mode", Enum("xla.ResultAccuracy.Mode")),
            (2, "tolerance", Msg("xla.ResultAccuracy.Tolerance")),
        ],
    ),
    (
        "xla.ResultAccuracy.Tolerance",
        &[
            (1, "atol", Scalar),
            (2, "rtol", Scalar),
            (3, "ulps", Scalar),
        ],
    ),
    (
        "xla.PrecisionConfig",
        &[
            (
                1,
                "operand_precision",
                Enum("xla.PrecisionConfig.Precision"),
            ),
            (2, "algorithm", Enum("xla.PrecisionConfig.Algorithm")),
        ],
    ),
    (
        "xla.ParameterReplication",
        &[(1, "replicated_at_leaf_buffers", Scalar)],
    ),
    (
        "xla.WhileLoopBackendConfig",
        &[
            (
                1,
                "known_trip_count",
                Msg("xla.WhileLoopBackendConfig.KnownTripCount"),
            ),
            (
                2,
                "known_init_step",
                Msg("xla.WhileLoopBackendConfig.KnownInitStep"),
            ),
            (
                3,
                "known_induction_variable",
                Msg("xla.WhileLoopBackendConfig.KnownInductionVariable"),
            ),
            (
                5,
                "dynamic_variables",
                Msg("xla.WhileLoopBackendConfig.DynamicVariable"),
            ),
        ],
    ),
    (
        "xla.WhileLoopBackendConfig.KnownInitStep",
        &[(1, "init", Scalar), (2, "step", Scalar)],
    ),
    (
        "xla.WhileLoopBackendConfig.KnownTripCount",
        &[(1, "n", Scalar)],
    ),
    (
        "xla.WhileLoopBackendConfig.KnownInductionVariable",
        &[(1, "tuple_index", Scalar)],
    ),
    (
        "xla.WhileLoopBackendConfig.DynamicVariable",
        &[
            (1, "tuple_index", Scalar),
            (2, "init", Scalar),
            (3, "step", Scalar),
        ],
    ),
    (
        "xla.OutputOperandAliasing",
        &[
            (1, "output_shape_index", Scalar),
            (2, "operand_index", Scalar),
            (3, "operand_shape_index", Scalar),
        ],
    ),
    (
        "xla.OriginalArrayProto",
        &[(1, "instruction_name", Scalar), (2, "shape_index", Scalar)],
    ),
    (
        "xla.OriginalValueElementProto",
        &[
            (1, "shape_index", Scalar),
            (2, "original_array", Msg("xla.OriginalArrayProto")),
        ],
    ),
    (
        "xla.OriginalValueProto",
        &[
            (1, "elements", Msg("xla.OriginalValueElementProto")),
            (2, "is_synthetic_call", Scalar),
        ],
    ),
    (
        "xla.GemmPerfTableEntry",
        &[
            (1, "b", Scalar),
            (2, "m", Scalar),
            (3, "n", Scalar),
            (4, "k", Scalar),
            (5, "flops", Msg("xla.GemmPerfTableEntry.FlopsEntry")),
        ],
    ),
    (
        "xla.GemmPerfTableEntry.FlopsEntry",
        &[(1, "key", Scalar), (2, "value", Scalar)],
    ),
    (
        "xla.GemmPerfTableEntryValues",
        &[(1, "entries", Msg("xla.GemmPerfTableEntry"))],
    ),
    (
        "xla.GemmPerfTable",
        &[(1, "entries", Msg("xla.GemmPerfTable.EntriesEntry"))],
    ),
    (
        "xla.GemmPerfTable.EntriesEntry",
        &[
            (1, "key", Scalar),
            (2, "value", Msg("xla.GemmPerfTableEntryValues")),
        ],
    ),
    (
        "xla.KeyValueMetric",
        &[(1, "key", Scalar), (2, "value", Scalar)],
    ),
    (
        "xla.PassMetrics",
        &[
            (1, "module_id", Scalar),
            (2, "pass_name", Scalar),
            (3, "pass_duration", Msg("google.protobuf.Duration")),
            (4, "custom_metrics", Msg("google.protobuf.Any")),
            (5, "kv_metrics", Msg("xla.KeyValueMetric")),
        ],
    ),
    (
        "xla.JobInfo",
        &[
            (1, "name", Scalar),
            (2, "cell", Scalar),
            (3, "user", Scalar),
            (4, "uid", Scalar),
            (5, "task_id", Scalar),
            (6, "task_uid", Scalar),
            (7, "process_id", Scalar),
            (8, "thread_id", Scalar),
        ],
    ),
    ("xla.TagMetric", &[(1, "key", Scalar), (2, "value", Scalar)]),
    (
        "xla.CompilationLogEntry",
        &[
            (1, "timestamp", Msg("google.protobuf.Timestamp")),
            (2, "stage", Enum("xla.CompilationLogEntry.CompilationStage")),
            (3, "duration", Msg("google.protobuf.Duration")),
            (4, "task_index", Scalar),
            (5, "pass_metrics", Msg("xla.PassMetrics")),
            (6, "module_ids", Scalar),
            (7, "job_info", Msg("xla.JobInfo")),
            (8, "hlo_module_name", Scalar),
            (9, "tag", Msg("xla.TagMetric")),
        ],
    ),
    (
        "xla.HloInstructionProto",
        &[
            (1, "name", Scalar),
            (2, "opcode", Scalar),
            (3, "shape", Msg("xla.ShapeProto")),
            (7, "metadata", Msg("xla.OpMetadata")),
            (8, "literal", Msg("xla.LiteralProto")),
            (9, "parameter_number", Scalar),
            (11, "fusion_kind", Scalar),
            (13, "tuple_index", Scalar),
            (14, "dimensions", Scalar),
            (15, "window", Msg("xla.Window")),
            (
                16,
                "convolution_dimension_numbers",
                Msg("xla.ConvolutionDimensionNumbers"),
            ),
            (50, "feature_group_count", Scalar),
            (58, "batch_group_count", Scalar),
            (
                17,
                "slice_dimensions",
                Msg("xla.HloInstructionProto.SliceDimensions"),
            ),
            (18, "exponent_bits", Scalar),
            (19, "mantissa_bits", Scalar),
            (20, "dynamic_slice_sizes", Scalar),
            (21, "padding_config", Msg("xla.PaddingConfig")),
            (22, "outfeed_config", Scalar),
            (23, "distribution", Enum("xla.RandomDistribution")),
            (24, "epsilon", Scalar),
            (25, "feature_index", Scalar),
            (26, "channel_id", Scalar),
            (27, "infeed_config", Scalar),
            (28, "custom_call_target", Scalar),
            (29, "outfeed_shape", Msg("xla.ShapeProto")),
            (30, "dot_dimension_numbers", Msg("xla.DotDimensionNumbers")),
            (
                90,
                "ragged_dot_dimension_numbers",
                Msg("xla.RaggedDotDimensionNumbers"),
            ),
            (31, "fft_type", Enum("xla.FftType")),
            (32, "fft_length", Scalar),
            (63, "comparison_direction", Scalar),
            (
                33,
                "gather_dimension_numbers",
                Msg("xla.GatherDimensionNumbers"),
            ),
            (34, "gather_slice_sizes", Scalar),
            (35, "id", Scalar),
            (36, "operand_ids", Scalar),
            (37, "control_predecessor_ids", Scalar),
            (38, "called_computation_ids", Scalar),
            (40, "sharding", Msg("xla.OpSharding")),
            (43, "backend_config", Scalar),
            (99, "backend_config_payload", Msg("xla.Payload")),
            (49, "replica_groups", Msg("xla.ReplicaGroup")),
            (45, "all_reduce_id", Scalar),
            (71, "use_global_device_ids", Scalar),
            (47, "is_host_transfer", Scalar),
            (60, "is_stable", Scalar),
            (
                48,
                "scatter_dimension_numbers",
                Msg("xla.ScatterDimensionNumbers"),
            ),
            (51, "precision_config", Msg("xla.PrecisionConfig")),
            (52, "source_target_pairs", Msg("xla.SourceTarget")),
            (54, "domain_entry_sharding", Msg("xla.OpSharding")),
            (55, "domain_exit_sharding", Msg("xla.OpSharding")),
            (56, "constrain_layout", Scalar),
            (57, "operand_shapes_with_layout", Msg("xla.ShapeProto")),
            (
                59,
                "triangular_solve_options",
                Msg("xla.TriangularSolveOptions"),
            ),
            (62, "cholesky_options", Msg("xla.CholeskyOptions")),
            (61, "parameter_replication", Msg("xla.ParameterReplication")),
            (65, "custom_call_has_side_effect", Scalar),
            (
                74,
                "output_operand_aliasing",
                Msg("xla.OutputOperandAliasing"),
            ),
            (76, "custom_call_schedule", Enum("xla.CustomCallSchedule")),
            (66, "delta", Scalar),
            (67, "indices_are_sorted", Scalar),
            (68, "frontend_attributes", Msg("xla.FrontendAttributes")),
            (69, "unique_indices", Scalar),
            (70, "rng_algorithm", Enum("xla.RandomAlgorithm")),
            (72, "comparison_type", Scalar),
            (73, "is_cross_program_prefetch", Scalar),
            (80, "cross_program_prefetch_index", Scalar),
            (75, "padding_type", Enum("xla.PaddingType")),
            (
                77,
                "custom_call_api_version",
                Enum("xla.CustomCallApiVersion"),
            ),
            (79, "async_execution_thread", Scalar),
            (81, "k", Scalar),
            (85, "largest", Scalar),
            (82, "statistics_viz", Msg("xla.StatisticsViz")),
            (
                87,
                "collective_device_list",
                Msg("xla.CollectiveDeviceListProto"),
            ),
            (
                92,
                "iota_collective_device_list",
                Msg("xla.IotaReplicaGroupListProto"),
            ),
            (
                93,
                "mesh_axes_replica_group_list",
                Msg("xla.MeshAxesReplicaGroupListProto"),
            ),
            (88, "original_value", Msg("xla.OriginalValueProto")),
            (89, "is_composite", Scalar),
            (91, "result_accuracy", Msg("xla.ResultAccuracy")),
            (94, "is_reverse", Scalar),
            (95, "num_carries", Scalar),
            (96, "is_associative", Enum("xla.TriState")),
            (97, "conv_kind", Enum("xla.ConvolutionKind")),
            (98, "sparsity_config", Msg("xla.SparsityConfig")),
        ],
    ),
    (
        "xla.HloInstructionProto.SliceDimensions",
        &[
            (1, "start", Scalar),
            (2, "limit", Scalar),
            (3, "stride", Scalar),
        ],
    ),
    (
        "xla.HloComputationProto",
        &[
            (1, "name", Scalar),
            (2, "instructions", Msg("xla.HloInstructionProto")),
            (4, "program_shape", Msg("xla.ProgramShapeProto")),
            (5, "id", Scalar),
            (6, "root_id", Scalar),
            (7, "is_fusion_computation", Scalar),
            (8, "execution_thread", Scalar),
        ],
    ),
    (
        "xla.HloScheduleProto",
        &[(1, "sequences", Msg("xla.HloScheduleProto.SequencesEntry"))],
    ),
    (
        "xla.HloScheduleProto.InstructionSequence",
        &[(1, "instruction_ids", Scalar)],
    ),
    (
        "xla.HloScheduleProto.SequencesEntry",
        &[
            (1, "key", Scalar),
            (2, "value", Msg("xla.HloScheduleProto.InstructionSequence")),
        ],
    ),
    (
        "xla.HloInputOutputAliasProto",
        &[(
            1,
            "entries",
            Msg("xla.HloInputOutputAliasProto.AliasEntryProto"),
        )],
    ),
    (
        "xla.HloInputOutputAliasProto.AliasEntryProto",
        &[
            (1, "output_shape_index", Scalar),
            (2, "parameter_number", Scalar),
            (3, "parameter_shape_index", Scalar),
            (4, "kind", Enum("xla.Kind")),
        ],
    ),
    (
        "xla.HloBufferDonorProto",
        &[(
            1,
            "entries",
            Msg("xla.HloBufferDonorProto.BufferDonorEntryProto"),
        )],
    ),
    (
        "xla.HloBufferDonorProto.BufferDonorEntryProto",
        &[
            (1, "parameter_number", Scalar),
            (2, "parameter_shape_index", Scalar),
        ],
    ),
    (
        "xla.CrossProgramPrefetch",
        &[
            (1, "parameter", Scalar),
            (2, "index", Scalar),
            (3, "offset", Scalar),
        ],
    ),
    (
        "xla.StackFrameIndexProto",
        &[
            (1, "file_names", Scalar),
            (2, "function_names", Scalar),
            (
                3,
                "file_locations",
                Msg("xla.StackFrameIndexProto.FileLocation"),
            ),
            (
                4,
                "stack_frames",
                Msg("xla.StackFrameIndexProto.StackFrame"),
            ),
        ],
    ),
    (
        "xla.StackFrameIndexProto.FileLocation",
        &[
            (1, "file_name_id", Scalar),
            (2, "function_name_id", Scalar),
            (3, "line", Scalar),
            (5, "end_line", Scalar),
            (4, "column", Scalar),
            (6, "end_column", Scalar),
        ],
    ),
    (
        "xla.StackFrameIndexProto.StackFrame",
        &[
            (1, "file_location_id", Scalar),
            (2, "parent_frame_id", Scalar),
        ],
    ),
    (
        "xla.HloModuleProto",
        &[
            (1, "name", Scalar),
            (2, "entry_computation_name", Scalar),
            (6, "entry_computation_id", Scalar),
            (3, "computations", Msg("xla.HloComputationProto")),
            (4, "host_program_shape", Msg("xla.ProgramShapeProto")),
            (5, "id", Scalar),
            (23, "pjrt_id", Scalar),
            (7, "schedule", Msg("xla.HloScheduleProto")),
            (8, "input_output_alias", Msg("xla.HloInputOutputAliasProto")),
            (22, "payloads", Scalar),
            (18, "buffer_donor", Msg("xla.HloBufferDonorProto")),
            (
                10,
                "cross_program_prefetches",
                Msg("xla.CrossProgramPrefetch"),
            ),
            (11, "is_dynamic", Scalar),
            (12, "spmd_output_sharding", Msg("xla.OpSharding")),
            (14, "spmd_parameters_shardings", Msg("xla.OpSharding")),
            (16, "use_auto_spmd_partitioning", Scalar),
            (13, "profile_info", Msg("xla.HloModuleProto.ProfileInfo")),
            (15, "device_assignment", Msg("xla.DeviceAssignmentProto")),
            (17, "stack_frame_index", Msg("xla.StackFrameIndexProto")),
            (19, "frontend_attributes", Msg("xla.FrontendAttributes")),
            (
                20,
                "original_value_recovery_table",
                Msg("xla.OriginalValueRecoveryTableProto"),
            ),
            (21, "device_type", Scalar),
        ],
    ),
    (
        "xla.HloModuleProto.ProfileInfo",
        &[
            (1, "profile_type", Enum("xla.HloModuleProto.ProfileType")),
            (2, "relative_speedup", Scalar),
            (3, "profile_source", Enum("xla.ProfileSource")),
            (4, "compilation_event", Enum("xla.CompilationEvent")),
            (5, "fingerprint", Scalar),
            (
                6,
                "profile_generation_strategy",
                Enum("xla.ProfileGenerationStrategy"),
            ),
            (7, "original_changelist", Scalar),
            (8, "changelist", Scalar),
        ],
    ),
    (
        "xla.LogicalBufferProto",
        &[
            (1, "id", Scalar),
            (2, "size", Scalar),
            (3, "defined_at", Msg("xla.LogicalBufferProto.Location")),
            (4, "color", Scalar),
        ],
    ),
    (
        "xla.LogicalBufferProto.Location",
        &[
            (2, "instruction_name", Scalar),
            (4, "instruction_id", Scalar),
            (3, "shape_index", Scalar),
        ],
    ),
    (
        "xla.BufferAllocationProto",
        &[
            (1, "index", Scalar),
            (2, "size", Scalar),
            (3, "is_thread_local", Scalar),
            (11, "is_tuple", Scalar),
            (5, "is_entry_computation_parameter", Scalar),
            (12, "is_constant", Scalar),
            (6, "parameter_number", Scalar),
            (10, "parameter_shape_index", Scalar),
            (13, "is_parameter_aliased_with_output", Scalar),
            (7, "maybe_live_out", Scalar),
            (8, "color", Scalar),
            (9, "assigned", Msg("xla.BufferAllocationProto.Assigned")),
        ],
    ),
    (
        "xla.BufferAllocationProto.Assigned",
        &[
            (1, "logical_buffer_id", Scalar),
            (2, "offset", Scalar),
            (3, "size", Scalar),
            (4, "element_type", Enum("xla.PrimitiveType")),
        ],
    ),
    (
        "xla.HeapSimulatorTrace",
        &[
            (1, "events", Msg("xla.HeapSimulatorTrace.Event")),
            (2, "whole_module_simulation", Scalar),
            (3, "buffer_allocation_index", Scalar),
        ],
    ),
    (
        "xla.HeapSimulatorTrace.Event",
        &[
            (1, "kind", Enum("xla.HeapSimulatorTrace.Event.Kind")),
            (2, "buffer_id", Scalar),
            (3, "computation_name", Scalar),
            (4, "instruction_name", Scalar),
            (5, "share_with_canonical_id", Scalar),
        ],
    ),
    (
        "xla.HloModuleGroupProto",
        &[
            (1, "name", Scalar),
            (2, "hlo_modules", Msg("xla.HloModuleProto")),
        ],
    ),
    (
        "xla.MemoryUsageReportProto",
        &[(
            1,
            "memory_space_allocation_entries",
            Msg("xla.MemoryUsageReportProto.AllocationEntryInMemorySpace"),
        )],
    ),
    (
        "xla.MemoryUsageReportProto.AllocationEntry",
        &[
            (1, "index", Scalar),
            (2, "size", Scalar),
            (3, "cumulative_size", Scalar),
            (4, "cumulative_percentage", Scalar),
            (5, "defining_positions", Scalar),
            (6, "hlo_text", Scalar),
        ],
    ),
    (
        "xla.MemoryUsageReportProto.AllocationEntryInMemorySpace",
        &[
            (1, "total_bytes", Scalar),
            (2, "memory_space_color", Scalar),
            (
                3,
                "allocation_entries",
                Msg("xla.MemoryUsageReportProto.AllocationEntry"),
            ),
        ],
    ),
    (
        "xla.BufferAssignmentProto",
        &[
            (1, "logical_buffers", Msg("xla.LogicalBufferProto")),
            (
                2,
                "buffer_aliases",
                Msg("xla.BufferAssignmentProto.BufferAlias"),
            ),
            (3, "buffer_allocations", Msg("xla.BufferAllocationProto")),
            (4, "heap_simulator_traces", Msg("xla.HeapSimulatorTrace")),
            (
                5,
                "peak_buffers",
                Msg("xla.BufferAssignmentProto.PeakBuffers"),
            ),
        ],
    ),
    (
        "xla.BufferAssignmentProto.BufferAlias",
        &[
            (1, "source_buffer_id", Scalar),
            (2, "location", Msg("xla.LogicalBufferProto.Location")),
        ],
    ),
    (
        "xla.BufferAssignmentProto.PeakBuffers",
        &[(1, "index", Scalar), (2, "logical_buffer_ids", Scalar)],
    ),
    (
        "xla.HloProto",
        &[
            (1, "hlo_module", Msg("xla.HloModuleProto")),
            (3, "buffer_assignment", Msg("xla.BufferAssignmentProto")),
        ],
    ),
    (
        "xla.HloSnapshot",
        &[
            (1, "hlo", Msg("xla.HloProto")),
            (2, "arguments", Msg("xla.LiteralProto")),
            (3, "result", Msg("xla.LiteralProto")),
            (4, "execution_platform", Scalar),
        ],
    ),
    (
        "xla.HloInputs",
        &[
            (1, "arguments", Msg("xla.LiteralProto")),
            (
                2,
                "arguments_descriptors",
                Msg("xla.HloInputs.LiteralDescriptor"),
            ),
        ],
    ),
    (
        "xla.HloInputs.LiteralDescriptor",
        &[(1, "version", Scalar), (2, "argument_size_bytes", Scalar)],
    ),
    (
        "xla.HloUnoptimizedSnapshot",
        &[
            (1, "hlo_module", Msg("xla.HloModuleProto")),
            (2, "partitions", Msg("xla.HloInputs")),
            (3, "version", Scalar),
        ],
    ),
    (
        "xla.HloModuleMetadataProto",
        &[
            (1, "canonical_module_id", Scalar),
            (2, "module_group_name", Scalar),
            (3, "original_module_id", Scalar),
            (4, "partitioned_module_ids", Scalar),
            (5, "pass_metadata", Msg("xla.HloPassMetadata")),
        ],
    ),
    (
        "xla.HloPassMetadata",
        &[
            (1, "pass_id", Scalar),
            (2, "pass_name", Scalar),
            (3, "pipeline_name", Scalar),
            (4, "dump_filenames", Scalar),
            (5, "module_changed", Scalar),
            (6, "module_id", Scalar),
            (7, "module_group_module_ids", Scalar),
            (8, "start_timestamp_usec", Scalar),
            (9, "end_timestamp_usec", Scalar),
            (10, "custom_metadata", Msg("google.protobuf.Any")),
            (11, "kv_metrics", Msg("xla.KeyValueMetric")),
        ],
    ),
    (
        "xla.OriginalValueRecoveryTableProto",
        &[(
            1,
            "entries",
            Msg("xla.OriginalValueRecoveryTableProto.Entry"),
        )],
    ),
    (
        "xla.OriginalValueRecoveryTableProto.Entry",
        &[
            (1, "old_original_array", Msg("xla.OriginalArrayProto")),
            (2, "new_original_array", Msg("xla.OriginalArrayProto")),
            (3, "recovery_module", Msg("xla.HloModuleProto")),
        ],
    ),
];

/// Package `xla`.
pub mod xla {
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct PaddingConfig {
        #[prost(message, repeated, tag = "1")]
        pub dimensions: ::prost::alloc::vec::Vec<padding_config::PaddingConfigDimension>,
    }
    /// Nested message and enum types in `PaddingConfig`.
    pub mod padding_config {
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct PaddingConfigDimension {
            #[prost(int64, tag = "1")]
            pub edge_padding_low: i64,
            #[prost(int64, tag = "2")]
            pub edge_padding_high: i64,
            #[prost(int64, tag = "3")]
            pub interior_padding: i64,
        }
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct TileProto {
        #[prost(int64, repeated, tag = "1")]
        pub dimensions: ::prost::alloc::vec::Vec<i64>,
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct SplitConfigProto {
        #[prost(int64, tag = "1")]
        pub dimension: i64,
        #[prost(int64, repeated, tag = "2")]
        pub split_indices: ::prost::alloc::vec::Vec<i64>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct LayoutProto {
        #[prost(int64, repeated, tag = "1")]
        pub minor_to_major: ::prost::alloc::vec::Vec<i64>,
        #[prost(enumeration = "DimLevelType", repeated, tag = "9")]
        pub dim_level_types: ::prost::alloc::vec::Vec<i32>,
        #[prost(bool, repeated, tag = "13")]
        pub dim_unique: ::prost::alloc::vec::Vec<bool>,
        #[prost(bool, repeated, tag = "14")]
        pub dim_ordered: ::prost::alloc::vec::Vec<bool>,
        #[prost(message, repeated, tag = "6")]
        pub tiles: ::prost::alloc::vec::Vec<TileProto>,
        #[prost(int64, tag = "16")]
        pub tail_padding_alignment_in_elements: i64,
        #[prost(int64, tag = "7")]
        pub element_size_in_bits: i64,
        #[prost(int64, tag = "8")]
        pub memory_space: i64,
        #[prost(enumeration = "PrimitiveType", tag = "11")]
        pub index_primitive_type: i32,
        #[prost(enumeration = "PrimitiveType", tag = "12")]
        pub pointer_primitive_type: i32,
        #[prost(message, optional, boxed, tag = "10")]
        pub physical_shape: ::core::option::Option<::prost::alloc::boxed::Box<ShapeProto>>,
        #[prost(int64, tag = "15")]
        pub dynamic_shape_metadata_prefix_bytes: i64,
        #[prost(message, repeated, tag = "17")]
        pub split_configs: ::prost::alloc::vec::Vec<SplitConfigProto>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct ShapeProto {
        #[prost(enumeration = "PrimitiveType", tag = "2")]
        pub element_type: i32,
        #[prost(int64, repeated, tag = "3")]
        pub dimensions: ::prost::alloc::vec::Vec<i64>,
        #[prost(bool, repeated, tag = "6")]
        pub is_dynamic_dimension: ::prost::alloc::vec::Vec<bool>,
        #[prost(message, repeated, tag = "4")]
        pub tuple_shapes: ::prost::alloc::vec::Vec<ShapeProto>,
        #[prost(message, optional, boxed, tag = "5")]
        pub layout: ::core::option::Option<::prost::alloc::boxed::Box<LayoutProto>>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct ProgramShapeProto {
        #[prost(message, repeated, tag = "1")]
        pub parameters: ::prost::alloc::vec::Vec<ShapeProto>,
        #[prost(message, optional, tag = "2")]
        pub result: ::core::option::Option<ShapeProto>,
        #[prost(string, repeated, tag = "3")]
        pub parameter_names: ::prost::alloc::vec::Vec<::prost::alloc::string::String>,
    }
    #[derive(Clone, Copy, PartialEq, ::prost::Message)]
    pub struct ComputationStats {
        #[prost(double, tag = "1")]
        pub flop_count: f64,
        #[prost(double, tag = "2")]
        pub transcendental_count: f64,
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct Payload {
        #[prost(oneof = "payload::PayloadSource", tags = "1, 2")]
        pub payload_source: ::core::option::Option<payload::PayloadSource>,
    }
    /// Nested message and enum types in `Payload`.
    pub mod payload {
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Oneof)]
        pub enum PayloadSource {
            #[prost(bytes, tag = "1")]
            Value(::prost::alloc::vec::Vec<u8>),
            #[prost(int64, tag = "2")]
            Id(i64),
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct OpMetadata {
        #[prost(string, tag = "1")]
        pub op_type: ::prost::alloc::string::String,
        #[prost(string, tag = "2")]
        pub op_name: ::prost::alloc::string::String,
        #[prost(string, tag = "3")]
        pub source_file: ::prost::alloc::string::String,
        #[prost(int32, tag = "4")]
        pub source_line: i32,
        #[prost(int32, tag = "17")]
        pub source_end_line: i32,
        #[prost(int32, tag = "18")]
        pub source_column: i32,
        #[prost(int32, tag = "19")]
        pub source_end_column: i32,
        #[deprecated]
        #[prost(enumeration = "ProfileType", repeated, tag = "5")]
        pub profile_type: ::prost::alloc::vec::Vec<i32>,
        #[prost(int64, tag = "8")]
        pub size_of_generated_code_in_bytes: i64,
        #[prost(int64, tag = "9")]
        pub size_of_memory_working_set_in_bytes: i64,
        #[prost(message, optional, tag = "10")]
        pub profile_info: ::core::option::Option<op_metadata::ProfileInfo>,
        #[prost(string, tag = "12")]
        pub deduplicated_name: ::prost::alloc::string::String,
        #[prost(int32, tag = "15")]
        pub stack_frame_id: i32,
        #[prost(string, tag = "16")]
        pub scheduling_name: ::prost::alloc::string::String,
        #[prost(message, optional, tag = "20")]
        pub metadata_payload: ::core::option::Option<Payload>,
    }
    /// Nested message and enum types in `OpMetadata`.
    pub mod op_metadata {
        #[derive(Clone, PartialEq, ::prost::Message)]
        pub struct ProfileInfo {
            #[prost(enumeration = "super::ProfileType", repeated, tag = "1")]
            pub profile_type: ::prost::alloc::vec::Vec<i32>,
            #[prost(double, tag = "2")]
            pub relative_speedup: f64,
            #[prost(enumeration = "super::ProfileSource", tag = "3")]
            pub profile_source: i32,
            #[prost(enumeration = "super::CompilationEvent", tag = "4")]
            pub compilation_event: i32,
            #[prost(enumeration = "super::ProfileGenerationStrategy", tag = "5")]
            pub profile_generation_strategy: i32,
        }
    }
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct ExecutionProfile {
        #[prost(bool, tag = "1")]
        pub compilation_cache_hit: bool,
        #[prost(int64, tag = "2")]
        pub compile_time_ms: i64,
        #[prost(int64, tag = "3")]
        pub compute_cycle_count: i64,
        #[prost(int64, tag = "4")]
        pub compute_time_ns: i64,
        #[prost(int64, tag = "5")]
        pub compute_and_transfer_time_ns: i64,
        #[prost(int64, tag = "6")]
        pub executable_size_in_bytes: i64,
        #[prost(bool, tag = "7")]
        pub profile_cache_hit: bool,
        #[prost(bool, tag = "8")]
        pub warmup_run_executed: bool,
    }
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct ExecutionHandle {
        #[prost(int64, tag = "1")]
        pub handle: i64,
    }
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct GlobalDataHandle {
        #[prost(int64, tag = "1")]
        pub handle: i64,
    }
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct DeviceHandle {
        #[prost(int64, tag = "1")]
        pub handle: i64,
        #[prost(int64, tag = "2")]
        pub device_count: i64,
    }
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct ChannelHandle {
        #[prost(int64, tag = "1")]
        pub handle: i64,
        #[prost(enumeration = "channel_handle::ChannelType", tag = "2")]
        pub r#type: i32,
    }
    /// Nested message and enum types in `ChannelHandle`.
    pub mod channel_handle {
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration,
        )]
        #[repr(i32)]
        pub enum ChannelType {
            Invalid = 0,
            DeviceToDevice = 1,
            DeviceToHost = 2,
            HostToDevice = 3,
        }
        impl ChannelType {
            /// String value of the enum field names used in the ProtoBuf definition.
            ///
            /// The values are not transformed in any way and thus are considered stable
            /// (if the ProtoBuf definition does not change) and safe for programmatic use.
            pub fn as_str_name(&self) -> &'static str {
                match self {
                    Self::Invalid => "CHANNEL_TYPE_INVALID",
                    Self::DeviceToDevice => "DEVICE_TO_DEVICE",
                    Self::DeviceToHost => "DEVICE_TO_HOST",
                    Self::HostToDevice => "HOST_TO_DEVICE",
                }
            }
            /// Creates an enum from field names used in the ProtoBuf definition.
            pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
                match value {
                    "CHANNEL_TYPE_INVALID" => Some(Self::Invalid),
                    "DEVICE_TO_DEVICE" => Some(Self::DeviceToDevice),
                    "DEVICE_TO_HOST" => Some(Self::DeviceToHost),
                    "HOST_TO_DEVICE" => Some(Self::HostToDevice),
                    _ => None,
                }
            }
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct DeviceAssignmentProto {
        #[prost(int32, tag = "1")]
        pub replica_count: i32,
        #[prost(int32, tag = "2")]
        pub computation_count: i32,
        #[prost(message, repeated, tag = "3")]
        pub computation_devices:
            ::prost::alloc::vec::Vec<device_assignment_proto::ComputationDevice>,
    }
    /// Nested message and enum types in `DeviceAssignmentProto`.
    pub mod device_assignment_proto {
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct ComputationDevice {
            #[prost(int64, repeated, tag = "1")]
            pub replica_device_ids: ::prost::alloc::vec::Vec<i64>,
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct LiteralProto {
        #[prost(message, optional, tag = "1")]
        pub shape: ::core::option::Option<ShapeProto>,
        #[prost(bool, repeated, tag = "2")]
        pub preds: ::prost::alloc::vec::Vec<bool>,
        #[prost(bytes = "vec", tag = "30")]
        pub s1s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "26")]
        pub s2s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "21")]
        pub s4s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "15")]
        pub s8s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "31")]
        pub u1s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "27")]
        pub u2s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "22")]
        pub u4s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "3")]
        pub u8s: ::prost::alloc::vec::Vec<u8>,
        #[prost(int32, repeated, tag = "4")]
        pub s32s: ::prost::alloc::vec::Vec<i32>,
        #[prost(int64, repeated, tag = "5")]
        pub s64s: ::prost::alloc::vec::Vec<i64>,
        #[prost(uint32, repeated, tag = "6")]
        pub u32s: ::prost::alloc::vec::Vec<u32>,
        #[prost(uint64, repeated, tag = "7")]
        pub u64s: ::prost::alloc::vec::Vec<u64>,
        #[prost(float, repeated, tag = "8")]
        pub f32s: ::prost::alloc::vec::Vec<f32>,
        #[prost(double, repeated, tag = "9")]
        pub f64s: ::prost::alloc::vec::Vec<f64>,
        #[prost(float, repeated, tag = "12")]
        pub c64s: ::prost::alloc::vec::Vec<f32>,
        #[prost(double, repeated, tag = "18")]
        pub c128s: ::prost::alloc::vec::Vec<f64>,
        #[prost(message, repeated, tag = "10")]
        pub tuple_literals: ::prost::alloc::vec::Vec<LiteralProto>,
        #[prost(bytes = "vec", tag = "11")]
        pub f16s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "13")]
        pub bf16s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "16")]
        pub u16s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "17")]
        pub s16s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "32")]
        pub f4e2m1fns: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "29")]
        pub f8e3m4s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "23")]
        pub f8e4m3b11fnuzs: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "20")]
        pub f8e4m3fns: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "25")]
        pub f8e4m3fnuzs: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "28")]
        pub f8e4m3s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "24")]
        pub f8e5m2fnuzs: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "19")]
        pub f8e5m2s: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "33")]
        pub f8e8m0fnus: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "35")]
        pub f6e3m2fns: ::prost::alloc::vec::Vec<u8>,
        #[prost(bytes = "vec", tag = "36")]
        pub f6e2m3fns: ::prost::alloc::vec::Vec<u8>,
        #[prost(int64, repeated, tag = "14")]
        pub sparse_indices: ::prost::alloc::vec::Vec<i64>,
        #[prost(int32, repeated, tag = "34")]
        pub dynamic_sizes: ::prost::alloc::vec::Vec<i32>,
    }
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct WindowDimension {
        #[prost(int64, tag = "1")]
        pub size: i64,
        #[prost(int64, tag = "2")]
        pub stride: i64,
        #[prost(int64, tag = "3")]
        pub padding_low: i64,
        #[prost(int64, tag = "4")]
        pub padding_high: i64,
        #[prost(int64, tag = "5")]
        pub window_dilation: i64,
        #[prost(int64, tag = "6")]
        pub base_dilation: i64,
        #[prost(bool, tag = "7")]
        pub window_reversal: bool,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Window {
        #[prost(message, repeated, tag = "1")]
        pub dimensions: ::prost::alloc::vec::Vec<WindowDimension>,
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct GatherDimensionNumbers {
        #[prost(int64, repeated, tag = "1")]
        pub offset_dims: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, repeated, tag = "2")]
        pub collapsed_slice_dims: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, repeated, tag = "3")]
        pub start_index_map: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, tag = "4")]
        pub index_vector_dim: i64,
        #[prost(int64, repeated, tag = "5")]
        pub operand_batching_dims: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, repeated, tag = "6")]
        pub start_indices_batching_dims: ::prost::alloc::vec::Vec<i64>,
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct ScatterDimensionNumbers {
        #[prost(int64, repeated, tag = "1")]
        pub update_window_dims: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, repeated, tag = "2")]
        pub inserted_window_dims: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, repeated, tag = "3")]
        pub scatter_dims_to_operand_dims: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, tag = "4")]
        pub index_vector_dim: i64,
        #[prost(int64, repeated, tag = "5")]
        pub input_batching_dims: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, repeated, tag = "6")]
        pub scatter_indices_batching_dims: ::prost::alloc::vec::Vec<i64>,
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct ConvolutionDimensionNumbers {
        #[prost(int64, tag = "7")]
        pub input_batch_dimension: i64,
        #[prost(int64, tag = "8")]
        pub input_feature_dimension: i64,
        #[prost(int64, repeated, tag = "11")]
        pub input_spatial_dimensions: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, tag = "3")]
        pub kernel_input_feature_dimension: i64,
        #[prost(int64, tag = "4")]
        pub kernel_output_feature_dimension: i64,
        #[prost(int64, repeated, tag = "6")]
        pub kernel_spatial_dimensions: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, tag = "9")]
        pub output_batch_dimension: i64,
        #[prost(int64, tag = "10")]
        pub output_feature_dimension: i64,
        #[prost(int64, repeated, tag = "12")]
        pub output_spatial_dimensions: ::prost::alloc::vec::Vec<i64>,
    }
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct SparsityConfig {
        #[prost(message, optional, tag = "1")]
        pub lhs: ::core::option::Option<sparsity_config::TensorSparsityConfig>,
        #[prost(message, optional, tag = "2")]
        pub rhs: ::core::option::Option<sparsity_config::TensorSparsityConfig>,
    }
    /// Nested message and enum types in `SparsityConfig`.
    pub mod sparsity_config {
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct TensorSparsityConfig {
            #[prost(int64, tag = "1")]
            pub num_non_zero: i64,
            #[prost(int64, tag = "2")]
            pub block_size: i64,
            #[prost(int64, tag = "3")]
            pub dimension: i64,
            #[prost(int64, tag = "4")]
            pub stride: i64,
        }
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct DotDimensionNumbers {
        #[prost(int64, repeated, tag = "1")]
        pub lhs_contracting_dimensions: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, repeated, tag = "2")]
        pub rhs_contracting_dimensions: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, repeated, tag = "3")]
        pub lhs_batch_dimensions: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, repeated, tag = "4")]
        pub rhs_batch_dimensions: ::prost::alloc::vec::Vec<i64>,
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct RaggedDotDimensionNumbers {
        #[prost(message, optional, tag = "1")]
        pub dot_dimension_numbers: ::core::option::Option<DotDimensionNumbers>,
        #[prost(int64, repeated, tag = "2")]
        pub lhs_ragged_dimensions: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, repeated, tag = "3")]
        pub rhs_group_dimensions: ::prost::alloc::vec::Vec<i64>,
    }
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct TriangularSolveOptions {
        #[prost(bool, tag = "1")]
        pub left_side: bool,
        #[prost(bool, tag = "2")]
        pub lower: bool,
        #[prost(bool, tag = "3")]
        pub unit_diagonal: bool,
        #[prost(enumeration = "triangular_solve_options::Transpose", tag = "4")]
        pub transpose_a: i32,
    }
    /// Nested message and enum types in `TriangularSolveOptions`.
    pub mod triangular_solve_options {
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration,
        )]
        #[repr(i32)]
        pub enum Transpose {
            Invalid = 0,
            NoTranspose = 1,
            Transpose = 2,
            Adjoint = 3,
        }
        impl Transpose {
            /// String value of the enum field names used in the ProtoBuf definition.
            ///
            /// The values are not transformed in any way and thus are considered stable
            /// (if the ProtoBuf definition does not change) and safe for programmatic use.
            pub fn as_str_name(&self) -> &'static str {
                match self {
                    Self::Invalid => "TRANSPOSE_INVALID",
                    Self::NoTranspose => "NO_TRANSPOSE",
                    Self::Transpose => "TRANSPOSE",
                    Self::Adjoint => "ADJOINT",
                }
            }
            /// Creates an enum from field names used in the ProtoBuf definition.
            pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
                match value {
                    "TRANSPOSE_INVALID" => Some(Self::Invalid),
                    "NO_TRANSPOSE" => Some(Self::NoTranspose),
                    "TRANSPOSE" => Some(Self::Transpose),
                    "ADJOINT" => Some(Self::Adjoint),
                    _ => None,
                }
            }
        }
    }
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct CholeskyOptions {
        #[prost(bool, tag = "1")]
        pub lower: bool,
    }
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct CubScanOptions {
        #[prost(int64, tag = "1")]
        pub vector_length: i64,
        #[prost(int64, tag = "2")]
        pub row_length: i64,
        #[prost(int64, tag = "3")]
        pub column_length: i64,
        #[prost(enumeration = "cub_scan_options::Kind", tag = "4")]
        pub kind: i32,
        #[prost(bool, tag = "5")]
        pub is_reverse: bool,
    }
    /// Nested message and enum types in `CubScanOptions`.
    pub mod cub_scan_options {
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration,
        )]
        #[repr(i32)]
        pub enum Kind {
            Invalid = 0,
            Sum = 1,
        }
        impl Kind {
            /// String value of the enum field names used in the ProtoBuf definition.
            ///
            /// The values are not transformed in any way and thus are considered stable
            /// (if the ProtoBuf definition does not change) and safe for programmatic use.
            pub fn as_str_name(&self) -> &'static str {
                match self {
                    Self::Invalid => "KIND_INVALID",
                    Self::Sum => "SUM",
                }
            }
            /// Creates an enum from field names used in the ProtoBuf definition.
            pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
                match value {
                    "KIND_INVALID" => Some(Self::Invalid),
                    "SUM" => Some(Self::Sum),
                    _ => None,
                }
            }
        }
    }
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct SortOptions {
        #[prost(bool, tag = "1")]
        pub descending: bool,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct FrontendAttributes {
        #[prost(btree_map = "string, string", tag = "1")]
        pub map: ::prost::alloc::collections::BTreeMap<
            ::prost::alloc::string::String,
            ::prost::alloc::string::String,
        >,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Statistic {
        #[prost(string, tag = "1")]
        pub stat_name: ::prost::alloc::string::String,
        #[prost(double, tag = "2")]
        pub stat_val: f64,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct StatisticsViz {
        #[prost(int64, tag = "1")]
        pub stat_index_to_visualize: i64,
        #[prost(message, repeated, tag = "2")]
        pub statistics: ::prost::alloc::vec::Vec<Statistic>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct MeshProto {
        #[prost(message, repeated, tag = "1")]
        pub axes: ::prost::alloc::vec::Vec<mesh_proto::MeshAxis>,
        #[prost(int64, repeated, tag = "2")]
        pub device_ids: ::prost::alloc::vec::Vec<i64>,
        #[prost(message, optional, tag = "3")]
        pub iota_transform: ::core::option::Option<mesh_proto::IotaTransform>,
    }
    /// Nested message and enum types in `MeshProto`.
    pub mod mesh_proto {
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct MeshAxis {
            #[prost(string, tag = "1")]
            pub name: ::prost::alloc::string::String,
            #[prost(int64, tag = "2")]
            pub size: i64,
        }
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct IotaTransform {
            #[prost(int64, repeated, tag = "1")]
            pub reshape_dims: ::prost::alloc::vec::Vec<i64>,
            #[prost(int64, repeated, tag = "2")]
            pub transpose_perm: ::prost::alloc::vec::Vec<i64>,
        }
    }
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct AxisRefProto {
        #[prost(int64, tag = "1")]
        pub mesh_axis_index: i64,
        #[prost(message, optional, tag = "2")]
        pub sub_axis_info: ::core::option::Option<axis_ref_proto::SubAxis>,
    }
    /// Nested message and enum types in `AxisRefProto`.
    pub mod axis_ref_proto {
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct SubAxis {
            #[prost(int64, tag = "1")]
            pub pre_size: i64,
            #[prost(int64, tag = "2")]
            pub size: i64,
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct NamedShardingProto {
        #[prost(message, optional, tag = "2")]
        pub mesh: ::core::option::Option<MeshProto>,
        #[prost(message, repeated, tag = "3")]
        pub dim_shardings: ::prost::alloc::vec::Vec<named_sharding_proto::DimensionSharding>,
        #[prost(message, repeated, tag = "4")]
        pub replicated_axes: ::prost::alloc::vec::Vec<AxisRefProto>,
        #[prost(message, repeated, tag = "5")]
        pub unreduced_axes: ::prost::alloc::vec::Vec<AxisRefProto>,
        #[prost(message, repeated, tag = "7")]
        pub manual_axes: ::prost::alloc::vec::Vec<AxisRefProto>,
        #[prost(message, repeated, tag = "6")]
        pub metadata: ::prost::alloc::vec::Vec<OpMetadata>,
    }
    /// Nested message and enum types in `NamedShardingProto`.
    pub mod named_sharding_proto {
        #[derive(Clone, PartialEq, ::prost::Message)]
        pub struct DimensionSharding {
            #[prost(message, repeated, tag = "1")]
            pub axes: ::prost::alloc::vec::Vec<super::AxisRefProto>,
            #[prost(bool, tag = "2")]
            pub is_closed: bool,
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct OpSharding {
        #[prost(enumeration = "op_sharding::Type", tag = "1")]
        pub r#type: i32,
        #[prost(message, optional, tag = "2")]
        pub tile_shape: ::core::option::Option<ShapeProto>,
        #[prost(int64, repeated, tag = "3")]
        pub tile_assignment_dimensions: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, repeated, tag = "4")]
        pub tile_assignment_devices: ::prost::alloc::vec::Vec<i64>,
        #[prost(message, repeated, tag = "5")]
        pub tuple_shardings: ::prost::alloc::vec::Vec<OpSharding>,
        #[prost(bool, tag = "6")]
        pub replicate_on_last_tile_dim: bool,
        #[prost(message, repeated, tag = "7")]
        pub metadata: ::prost::alloc::vec::Vec<OpMetadata>,
        #[prost(enumeration = "op_sharding::Type", repeated, tag = "8")]
        pub last_tile_dims: ::prost::alloc::vec::Vec<i32>,
        #[prost(int64, repeated, tag = "9")]
        pub iota_reshape_dims: ::prost::alloc::vec::Vec<i64>,
        #[prost(int32, repeated, tag = "10")]
        pub iota_transpose_perm: ::prost::alloc::vec::Vec<i32>,
        #[prost(bool, tag = "11")]
        pub is_shard_group: bool,
        #[prost(int64, tag = "12")]
        pub shard_group_id: i64,
        #[prost(enumeration = "op_sharding::ShardGroupType", tag = "13")]
        pub shard_group_type: i32,
        #[prost(message, optional, tag = "14")]
        pub named_sharding: ::core::option::Option<NamedShardingProto>,
    }
    /// Nested message and enum types in `OpSharding`.
    pub mod op_sharding {
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration,
        )]
        #[repr(i32)]
        pub enum Type {
            Replicated = 0,
            Maximal = 1,
            Tuple = 2,
            Other = 3,
            Manual = 4,
            Unknown = 5,
            Unreduced = 6,
        }
        impl Type {
            /// String value of the enum field names used in the ProtoBuf definition.
            ///
            /// The values are not transformed in any way and thus are considered stable
            /// (if the ProtoBuf definition does not change) and safe for programmatic use.
            pub fn as_str_name(&self) -> &'static str {
                match self {
                    Self::Replicated => "REPLICATED",
                    Self::Maximal => "MAXIMAL",
                    Self::Tuple => "TUPLE",
                    Self::Other => "OTHER",
                    Self::Manual => "MANUAL",
                    Self::Unknown => "UNKNOWN",
                    Self::Unreduced => "UNREDUCED",
                }
            }
            /// Creates an enum from field names used in the ProtoBuf definition.
            pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
                match value {
                    "REPLICATED" => Some(Self::Replicated),
                    "MAXIMAL" => Some(Self::Maximal),
                    "TUPLE" => Some(Self::Tuple),
                    "OTHER" => Some(Self::Other),
                    "MANUAL" => Some(Self::Manual),
                    "UNKNOWN" => Some(Self::Unknown),
                    "UNREDUCED" => Some(Self::Unreduced),
                    _ => None,
                }
            }
        }
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration,
        )]
        #[repr(i32)]
        pub enum ShardGroupType {
            As = 0,
            Like = 1,
        }
        impl ShardGroupType {
            /// String value of the enum field names used in the ProtoBuf definition.
            ///
            /// The values are not transformed in any way and thus are considered stable
            /// (if the ProtoBuf definition does not change) and safe for programmatic use.
            pub fn as_str_name(&self) -> &'static str {
                match self {
                    Self::As => "AS",
                    Self::Like => "LIKE",
                }
            }
            /// Creates an enum from field names used in the ProtoBuf definition.
            pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
                match value {
                    "AS" => Some(Self::As),
                    "LIKE" => Some(Self::Like),
                    _ => None,
                }
            }
        }
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct ReplicaGroup {
        #[prost(int64, repeated, tag = "1")]
        pub replica_ids: ::prost::alloc::vec::Vec<i64>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct MeshAxesReplicaGroupListProto {
        #[prost(message, optional, tag = "1")]
        pub mesh: ::core::option::Option<MeshProto>,
        #[prost(message, repeated, tag = "2")]
        pub axes: ::prost::alloc::vec::Vec<AxisRefProto>,
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct IotaReplicaGroupListProto {
        #[prost(int64, tag = "1")]
        pub num_replica_groups: i64,
        #[prost(int64, tag = "2")]
        pub num_devices_per_group: i64,
        #[prost(int64, repeated, tag = "3")]
        pub iota_reshape_dims: ::prost::alloc::vec::Vec<i64>,
        #[prost(int32, repeated, tag = "4")]
        pub iota_transpose_perm: ::prost::alloc::vec::Vec<i32>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct CollectiveDeviceListProto {
        #[prost(message, repeated, tag = "1")]
        pub replica_groups: ::prost::alloc::vec::Vec<ReplicaGroup>,
    }
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct SourceTarget {
        #[prost(int64, tag = "1")]
        pub source: i64,
        #[prost(int64, tag = "2")]
        pub target: i64,
    }
    #[derive(Clone, Copy, PartialEq, ::prost::Message)]
    pub struct ResultAccuracy {
        #[prost(oneof = "result_accuracy::Specs", tags = "1, 2")]
        pub specs: ::core::option::Option<result_accuracy::Specs>,
    }
    /// Nested message and enum types in `ResultAccuracy`.
    pub mod result_accuracy {
        #[derive(Clone, Copy, PartialEq, ::prost::Message)]
        pub struct Tolerance {
            #[prost(double, tag = "1")]
            pub atol: f64,
            #[prost(double, tag = "2")]
            pub rtol: f64,
            #[prost(int64, tag = "3")]
            pub ulps: i64,
        }
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration,
        )]
        #[repr(i32)]
        pub enum Mode {
            Default = 0,
            Highest = 1,
        }
        impl Mode {
            /// String value of the enum field names used in the ProtoBuf definition.
            ///
            /// The values are not transformed in any way and thus are considered stable
            /// (if the ProtoBuf definition does not change) and safe for programmatic use.
            pub fn as_str_name(&self) -> &'static str {
                match self {
                    Self::Default => "DEFAULT",
                    Self::Highest => "HIGHEST",
                }
            }
            /// Creates an enum from field names used in the ProtoBuf definition.
            pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
                match value {
                    "DEFAULT" => Some(Self::Default),
                    "HIGHEST" => Some(Self::Highest),
                    _ => None,
                }
            }
        }
        #[derive(Clone, Copy, PartialEq, ::prost::Oneof)]
        pub enum Specs {
            #[prost(enumeration = "Mode", tag = "1")]
            Mode(i32),
            #[prost(message, tag = "2")]
            Tolerance(Tolerance),
        }
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct PrecisionConfig {
        #[prost(enumeration = "precision_config::Precision", repeated, tag = "1")]
        pub operand_precision: ::prost::alloc::vec::Vec<i32>,
        #[prost(enumeration = "precision_config::Algorithm", tag = "2")]
        pub algorithm: i32,
    }
    /// Nested message and enum types in `PrecisionConfig`.
    pub mod precision_config {
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration,
        )]
        #[repr(i32)]
        pub enum Precision {
            Default = 0,
            High = 1,
            Highest = 2,
        }
        impl Precision {
            /// String value of the enum field names used in the ProtoBuf definition.
            ///
            /// The values are not transformed in any way and thus are considered stable
            /// (if the ProtoBuf definition does not change) and safe for programmatic use.
            pub fn as_str_name(&self) -> &'static str {
                match self {
                    Self::Default => "DEFAULT",
                    Self::High => "HIGH",
                    Self::Highest => "HIGHEST",
                }
            }
            /// Creates an enum from field names used in the ProtoBuf definition.
            pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
                match value {
                    "DEFAULT" => Some(Self::Default),
                    "HIGH" => Some(Self::High),
                    "HIGHEST" => Some(Self::Highest),
                    _ => None,
                }
            }
        }
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration,
        )]
        #[repr(i32)]
        pub enum Algorithm {
            AlgUnset = 0,
            AlgDotAnyF8AnyF8F32 = 1,
            AlgDotAnyF8AnyF8F32FastAccum = 2,
            AlgDotF16F16F16 = 3,
            AlgDotF16F16F32 = 4,
            AlgDotBf16Bf16Bf16 = 5,
            AlgDotBf16Bf16F32 = 6,
            AlgDotBf16Bf16F32X3 = 7,
            AlgDotBf16Bf16F32X6 = 8,
            AlgDotTf32Tf32F32 = 9,
            AlgDotTf32Tf32F32X3 = 10,
            AlgDotF32F32F32 = 11,
            AlgDotF64F64F64 = 12,
            AlgDotBf16Bf16F32X9 = 13,
        }
        impl Algorithm {
            /// String value of the enum field names used in the ProtoBuf definition.
            ///
            /// The values are not transformed in any way and thus are considered stable
            /// (if the ProtoBuf definition does not change) and safe for programmatic use.
            pub fn as_str_name(&self) -> &'static str {
                match self {
                    Self::AlgUnset => "ALG_UNSET",
                    Self::AlgDotAnyF8AnyF8F32 => "ALG_DOT_ANY_F8_ANY_F8_F32",
                    Self::AlgDotAnyF8AnyF8F32FastAccum => "ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM",
                    Self::AlgDotF16F16F16 => "ALG_DOT_F16_F16_F16",
                    Self::AlgDotF16F16F32 => "ALG_DOT_F16_F16_F32",
                    Self::AlgDotBf16Bf16Bf16 => "ALG_DOT_BF16_BF16_BF16",
                    Self::AlgDotBf16Bf16F32 => "ALG_DOT_BF16_BF16_F32",
                    Self::AlgDotBf16Bf16F32X3 => "ALG_DOT_BF16_BF16_F32_X3",
                    Self::AlgDotBf16Bf16F32X6 => "ALG_DOT_BF16_BF16_F32_X6",
                    Self::AlgDotTf32Tf32F32 => "ALG_DOT_TF32_TF32_F32",
                    Self::AlgDotTf32Tf32F32X3 => "ALG_DOT_TF32_TF32_F32_X3",
                    Self::AlgDotF32F32F32 => "ALG_DOT_F32_F32_F32",
                    Self::AlgDotF64F64F64 => "ALG_DOT_F64_F64_F64",
                    Self::AlgDotBf16Bf16F32X9 => "ALG_DOT_BF16_BF16_F32_X9",
                }
            }
            /// Creates an enum from field names used in the ProtoBuf definition.
            pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
                match value {
                    "ALG_UNSET" => Some(Self::AlgUnset),
                    "ALG_DOT_ANY_F8_ANY_F8_F32" => Some(Self::AlgDotAnyF8AnyF8F32),
                    "ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM" => {
                        Some(Self::AlgDotAnyF8AnyF8F32FastAccum)
                    }
                    "ALG_DOT_F16_F16_F16" => Some(Self::AlgDotF16F16F16),
                    "ALG_DOT_F16_F16_F32" => Some(Self::AlgDotF16F16F32),
                    "ALG_DOT_BF16_BF16_BF16" => Some(Self::AlgDotBf16Bf16Bf16),
                    "ALG_DOT_BF16_BF16_F32" => Some(Self::AlgDotBf16Bf16F32),
                    "ALG_DOT_BF16_BF16_F32_X3" => Some(Self::AlgDotBf16Bf16F32X3),
                    "ALG_DOT_BF16_BF16_F32_X6" => Some(Self::AlgDotBf16Bf16F32X6),
                    "ALG_DOT_TF32_TF32_F32" => Some(Self::AlgDotTf32Tf32F32),
                    "ALG_DOT_TF32_TF32_F32_X3" => Some(Self::AlgDotTf32Tf32F32X3),
                    "ALG_DOT_F32_F32_F32" => Some(Self::AlgDotF32F32F32),
                    "ALG_DOT_F64_F64_F64" => Some(Self::AlgDotF64F64F64),
                    "ALG_DOT_BF16_BF16_F32_X9" => Some(Self::AlgDotBf16Bf16F32X9),
                    _ => None,
                }
            }
        }
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct ParameterReplication {
        #[prost(bool, repeated, tag = "1")]
        pub replicated_at_leaf_buffers: ::prost::alloc::vec::Vec<bool>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct WhileLoopBackendConfig {
        #[prost(message, optional, tag = "1")]
        pub known_trip_count: ::core::option::Option<while_loop_backend_config::KnownTripCount>,
        #[prost(message, optional, tag = "2")]
        pub known_init_step: ::core::option::Option<while_loop_backend_config::KnownInitStep>,
        #[prost(message, optional, tag = "3")]
        pub known_induction_variable:
            ::core::option::Option<while_loop_backend_config::KnownInductionVariable>,
        #[prost(message, repeated, tag = "5")]
        pub dynamic_variables: ::prost::alloc::vec::Vec<while_loop_backend_config::DynamicVariable>,
    }
    /// Nested message and enum types in `WhileLoopBackendConfig`.
    pub mod while_loop_backend_config {
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct KnownInitStep {
            #[prost(int64, tag = "1")]
            pub init: i64,
            #[prost(int64, tag = "2")]
            pub step: i64,
        }
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct KnownTripCount {
            #[prost(int64, tag = "1")]
            pub n: i64,
        }
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct KnownInductionVariable {
            #[prost(int64, tag = "1")]
            pub tuple_index: i64,
        }
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct DynamicVariable {
            #[prost(int64, tag = "1")]
            pub tuple_index: i64,
            #[prost(int64, optional, tag = "2")]
            pub init: ::core::option::Option<i64>,
            #[prost(int64, optional, tag = "3")]
            pub step: ::core::option::Option<i64>,
        }
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct OutputOperandAliasing {
        #[prost(int64, repeated, tag = "1")]
        pub output_shape_index: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, tag = "2")]
        pub operand_index: i64,
        #[prost(int64, repeated, tag = "3")]
        pub operand_shape_index: ::prost::alloc::vec::Vec<i64>,
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct OriginalArrayProto {
        #[prost(string, tag = "1")]
        pub instruction_name: ::prost::alloc::string::String,
        #[prost(int64, repeated, tag = "2")]
        pub shape_index: ::prost::alloc::vec::Vec<i64>,
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct OriginalValueElementProto {
        #[prost(int64, repeated, tag = "1")]
        pub shape_index: ::prost::alloc::vec::Vec<i64>,
        #[prost(message, optional, tag = "2")]
        pub original_array: ::core::option::Option<OriginalArrayProto>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct OriginalValueProto {
        #[prost(message, repeated, tag = "1")]
        pub elements: ::prost::alloc::vec::Vec<OriginalValueElementProto>,
        #[prost(bool, tag = "2")]
        pub is_synthetic_call: bool,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct GemmPerfTableEntry {
        #[prost(int64, tag = "1")]
        pub b: i64,
        #[prost(int64, tag = "2")]
        pub m: i64,
        #[prost(int64, tag = "3")]
        pub n: i64,
        #[prost(int64, tag = "4")]
        pub k: i64,
        #[prost(btree_map = "string, int64", tag = "5")]
        pub flops: ::prost::alloc::collections::BTreeMap<::prost::alloc::string::String, i64>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct GemmPerfTableEntryValues {
        #[prost(message, repeated, tag = "1")]
        pub entries: ::prost::alloc::vec::Vec<GemmPerfTableEntry>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct GemmPerfTable {
        #[prost(btree_map = "string, message", tag = "1")]
        pub entries: ::prost::alloc::collections::BTreeMap<
            ::prost::alloc::string::String,
            GemmPerfTableEntryValues,
        >,
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum PrimitiveType {
        Invalid = 0,
        Pred = 1,
        S1 = 30,
        S2 = 26,
        S4 = 21,
        S8 = 2,
        S16 = 3,
        S32 = 4,
        S64 = 5,
        U1 = 31,
        U2 = 27,
        U4 = 22,
        U8 = 6,
        U16 = 7,
        U32 = 8,
        U64 = 9,
        F16 = 10,
        F32 = 11,
        Bf16 = 16,
        F64 = 12,
        F8e5m2 = 19,
        F8e4m3 = 28,
        F8e4m3fn = 20,
        F8e4m3b11fnuz = 23,
        F8e3m4 = 29,
        F8e5m2fnuz = 24,
        F8e4m3fnuz = 25,
        F4e2m1fn = 32,
        F8e8m0fnu = 33,
        F6e3m2fn = 35,
        F6e2m3fn = 36,
        C64 = 15,
        C128 = 18,
        Tuple = 13,
        OpaqueType = 14,
        Token = 17,
        Buffer = 34,
    }
    impl PrimitiveType {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::Invalid => "PRIMITIVE_TYPE_INVALID",
                Self::Pred => "PRED",
                Self::S1 => "S1",
                Self::S2 => "S2",
                Self::S4 => "S4",
                Self::S8 => "S8",
                Self::S16 => "S16",
                Self::S32 => "S32",
                Self::S64 => "S64",
                Self::U1 => "U1",
                Self::U2 => "U2",
                Self::U4 => "U4",
                Self::U8 => "U8",
                Self::U16 => "U16",
                Self::U32 => "U32",
                Self::U64 => "U64",
                Self::F16 => "F16",
                Self::F32 => "F32",
                Self::Bf16 => "BF16",
                Self::F64 => "F64",
                Self::F8e5m2 => "F8E5M2",
                Self::F8e4m3 => "F8E4M3",
                Self::F8e4m3fn => "F8E4M3FN",
                Self::F8e4m3b11fnuz => "F8E4M3B11FNUZ",
                Self::F8e3m4 => "F8E3M4",
                Self::F8e5m2fnuz => "F8E5M2FNUZ",
                Self::F8e4m3fnuz => "F8E4M3FNUZ",
                Self::F4e2m1fn => "F4E2M1FN",
                Self::F8e8m0fnu => "F8E8M0FNU",
                Self::F6e3m2fn => "F6E3M2FN",
                Self::F6e2m3fn => "F6E2M3FN",
                Self::C64 => "C64",
                Self::C128 => "C128",
                Self::Tuple => "TUPLE",
                Self::OpaqueType => "OPAQUE_TYPE",
                Self::Token => "TOKEN",
                Self::Buffer => "BUFFER",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "PRIMITIVE_TYPE_INVALID" => Some(Self::Invalid),
                "PRED" => Some(Self::Pred),
                "S1" => Some(Self::S1),
                "S2" => Some(Self::S2),
                "S4" => Some(Self::S4),
                "S8" => Some(Self::S8),
                "S16" => Some(Self::S16),
                "S32" => Some(Self::S32),
                "S64" => Some(Self::S64),
                "U1" => Some(Self::U1),
                "U2" => Some(Self::U2),
                "U4" => Some(Self::U4),
                "U8" => Some(Self::U8),
                "U16" => Some(Self::U16),
                "U32" => Some(Self::U32),
                "U64" => Some(Self::U64),
                "F16" => Some(Self::F16),
                "F32" => Some(Self::F32),
                "BF16" => Some(Self::Bf16),
                "F64" => Some(Self::F64),
                "F8E5M2" => Some(Self::F8e5m2),
                "F8E4M3" => Some(Self::F8e4m3),
                "F8E4M3FN" => Some(Self::F8e4m3fn),
                "F8E4M3B11FNUZ" => Some(Self::F8e4m3b11fnuz),
                "F8E3M4" => Some(Self::F8e3m4),
                "F8E5M2FNUZ" => Some(Self::F8e5m2fnuz),
                "F8E4M3FNUZ" => Some(Self::F8e4m3fnuz),
                "F4E2M1FN" => Some(Self::F4e2m1fn),
                "F8E8M0FNU" => Some(Self::F8e8m0fnu),
                "F6E3M2FN" => Some(Self::F6e3m2fn),
                "F6E2M3FN" => Some(Self::F6e2m3fn),
                "C64" => Some(Self::C64),
                "C128" => Some(Self::C128),
                "TUPLE" => Some(Self::Tuple),
                "OPAQUE_TYPE" => Some(Self::OpaqueType),
                "TOKEN" => Some(Self::Token),
                "BUFFER" => Some(Self::Buffer),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum AsyncStreamKind {
        Collective = 0,
        P2p0 = 1,
        P2p1 = 2,
        Memcpyp2p = 3,
    }
    impl AsyncStreamKind {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::Collective => "ASYNC_STREAM_KIND_COLLECTIVE",
                Self::P2p0 => "ASYNC_STREAM_KIND_P2P0",
                Self::P2p1 => "ASYNC_STREAM_KIND_P2P1",
                Self::Memcpyp2p => "ASYNC_STREAM_KIND_MEMCPYP2P",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "ASYNC_STREAM_KIND_COLLECTIVE" => Some(Self::Collective),
                "ASYNC_STREAM_KIND_P2P0" => Some(Self::P2p0),
                "ASYNC_STREAM_KIND_P2P1" => Some(Self::P2p1),
                "ASYNC_STREAM_KIND_MEMCPYP2P" => Some(Self::Memcpyp2p),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum CollectiveOpGroupMode {
        CrossReplica = 0,
        CrossPartition = 1,
        CrossReplicaAndPartition = 2,
        FlattenedId = 3,
    }
    impl CollectiveOpGroupMode {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::CrossReplica => "COLLECTIVE_OP_GROUP_MODE_CROSS_REPLICA",
                Self::CrossPartition => "COLLECTIVE_OP_GROUP_MODE_CROSS_PARTITION",
                Self::CrossReplicaAndPartition => {
                    "COLLECTIVE_OP_GROUP_MODE_CROSS_REPLICA_AND_PARTITION"
                }
                Self::FlattenedId => "COLLECTIVE_OP_GROUP_MODE_FLATTENED_ID",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "COLLECTIVE_OP_GROUP_MODE_CROSS_REPLICA" => Some(Self::CrossReplica),
                "COLLECTIVE_OP_GROUP_MODE_CROSS_PARTITION" => Some(Self::CrossPartition),
                "COLLECTIVE_OP_GROUP_MODE_CROSS_REPLICA_AND_PARTITION" => {
                    Some(Self::CrossReplicaAndPartition)
                }
                "COLLECTIVE_OP_GROUP_MODE_FLATTENED_ID" => Some(Self::FlattenedId),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum DimLevelType {
        DimDense = 0,
        DimCompressed = 1,
        DimSingleton = 2,
        DimLooseCompressed = 3,
    }
    impl DimLevelType {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::DimDense => "DIM_DENSE",
                Self::DimCompressed => "DIM_COMPRESSED",
                Self::DimSingleton => "DIM_SINGLETON",
                Self::DimLooseCompressed => "DIM_LOOSE_COMPRESSED",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "DIM_DENSE" => Some(Self::DimDense),
                "DIM_COMPRESSED" => Some(Self::DimCompressed),
                "DIM_SINGLETON" => Some(Self::DimSingleton),
                "DIM_LOOSE_COMPRESSED" => Some(Self::DimLooseCompressed),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum ProfileType {
        Invalid = 0,
        Window = 1,
        Flag = 2,
        Integer = 3,
    }
    impl ProfileType {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::Invalid => "INVALID",
                Self::Window => "WINDOW",
                Self::Flag => "FLAG",
                Self::Integer => "INTEGER",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "INVALID" => Some(Self::Invalid),
                "WINDOW" => Some(Self::Window),
                "FLAG" => Some(Self::Flag),
                "INTEGER" => Some(Self::Integer),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum ProfileSource {
        UnknownSource = 0,
        Embedded = 1,
        Remote = 2,
    }
    impl ProfileSource {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::UnknownSource => "PROFILE_SOURCE_UNKNOWN_SOURCE",
                Self::Embedded => "PROFILE_SOURCE_EMBEDDED",
                Self::Remote => "PROFILE_SOURCE_REMOTE",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "PROFILE_SOURCE_UNKNOWN_SOURCE" => Some(Self::UnknownSource),
                "PROFILE_SOURCE_EMBEDDED" => Some(Self::Embedded),
                "PROFILE_SOURCE_REMOTE" => Some(Self::Remote),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum CompilationEvent {
        UnknownEvent = 0,
        FirstCompilation = 1,
        Recompilation = 2,
    }
    impl CompilationEvent {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::UnknownEvent => "COMPILATION_EVENT_UNKNOWN_EVENT",
                Self::FirstCompilation => "COMPILATION_EVENT_FIRST_COMPILATION",
                Self::Recompilation => "COMPILATION_EVENT_RECOMPILATION",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "COMPILATION_EVENT_UNKNOWN_EVENT" => Some(Self::UnknownEvent),
                "COMPILATION_EVENT_FIRST_COMPILATION" => Some(Self::FirstCompilation),
                "COMPILATION_EVENT_RECOMPILATION" => Some(Self::Recompilation),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum ProfileGenerationStrategy {
        Unknown = 0,
        Ga = 1,
        Fanta = 2,
        Cfo = 3,
        Exhaustive = 4,
        LcmGnn = 5,
        LcmMoe = 6,
    }
    impl ProfileGenerationStrategy {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::Unknown => "PROFILE_GENERATION_STRATEGY_UNKNOWN",
                Self::Ga => "PROFILE_GENERATION_STRATEGY_GA",
                Self::Fanta => "PROFILE_GENERATION_STRATEGY_FANTA",
                Self::Cfo => "PROFILE_GENERATION_STRATEGY_CFO",
                Self::Exhaustive => "PROFILE_GENERATION_STRATEGY_EXHAUSTIVE",
                Self::LcmGnn => "PROFILE_GENERATION_STRATEGY_LCM_GNN",
                Self::LcmMoe => "PROFILE_GENERATION_STRATEGY_LCM_MOE",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "PROFILE_GENERATION_STRATEGY_UNKNOWN" => Some(Self::Unknown),
                "PROFILE_GENERATION_STRATEGY_GA" => Some(Self::Ga),
                "PROFILE_GENERATION_STRATEGY_FANTA" => Some(Self::Fanta),
                "PROFILE_GENERATION_STRATEGY_CFO" => Some(Self::Cfo),
                "PROFILE_GENERATION_STRATEGY_EXHAUSTIVE" => Some(Self::Exhaustive),
                "PROFILE_GENERATION_STRATEGY_LCM_GNN" => Some(Self::LcmGnn),
                "PROFILE_GENERATION_STRATEGY_LCM_MOE" => Some(Self::LcmMoe),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum PaddingType {
        PaddingInvalid = 0,
        PaddingValid = 1,
        PaddingSame = 2,
    }
    impl PaddingType {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::PaddingInvalid => "PADDING_INVALID",
                Self::PaddingValid => "PADDING_VALID",
                Self::PaddingSame => "PADDING_SAME",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "PADDING_INVALID" => Some(Self::PaddingInvalid),
                "PADDING_VALID" => Some(Self::PaddingValid),
                "PADDING_SAME" => Some(Self::PaddingSame),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum FftType {
        Fft = 0,
        Ifft = 1,
        Rfft = 2,
        Irfft = 3,
    }
    impl FftType {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::Fft => "FFT",
                Self::Ifft => "IFFT",
                Self::Rfft => "RFFT",
                Self::Irfft => "IRFFT",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "FFT" => Some(Self::Fft),
                "IFFT" => Some(Self::Ifft),
                "RFFT" => Some(Self::Rfft),
                "IRFFT" => Some(Self::Irfft),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum RandomDistribution {
        RngInvalid = 0,
        RngUniform = 1,
        RngNormal = 2,
    }
    impl RandomDistribution {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::RngInvalid => "RNG_INVALID",
                Self::RngUniform => "RNG_UNIFORM",
                Self::RngNormal => "RNG_NORMAL",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "RNG_INVALID" => Some(Self::RngInvalid),
                "RNG_UNIFORM" => Some(Self::RngUniform),
                "RNG_NORMAL" => Some(Self::RngNormal),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum RandomAlgorithm {
        RngDefault = 0,
        RngThreeFry = 1,
        RngPhilox = 2,
    }
    impl RandomAlgorithm {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::RngDefault => "RNG_DEFAULT",
                Self::RngThreeFry => "RNG_THREE_FRY",
                Self::RngPhilox => "RNG_PHILOX",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "RNG_DEFAULT" => Some(Self::RngDefault),
                "RNG_THREE_FRY" => Some(Self::RngThreeFry),
                "RNG_PHILOX" => Some(Self::RngPhilox),
                _ => None,
            }
        }
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct KeyValueMetric {
        #[prost(string, tag = "1")]
        pub key: ::prost::alloc::string::String,
        #[prost(int64, tag = "2")]
        pub value: i64,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct PassMetrics {
        #[prost(uint64, tag = "1")]
        pub module_id: u64,
        #[prost(string, tag = "2")]
        pub pass_name: ::prost::alloc::string::String,
        #[prost(message, optional, tag = "3")]
        pub pass_duration: ::core::option::Option<super::google::protobuf::Duration>,
        #[prost(message, optional, tag = "4")]
        pub custom_metrics: ::core::option::Option<super::google::protobuf::Any>,
        #[prost(message, repeated, tag = "5")]
        pub kv_metrics: ::prost::alloc::vec::Vec<KeyValueMetric>,
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct JobInfo {
        #[prost(string, optional, tag = "1")]
        pub name: ::core::option::Option<::prost::alloc::string::String>,
        #[prost(string, optional, tag = "2")]
        pub cell: ::core::option::Option<::prost::alloc::string::String>,
        #[prost(string, optional, tag = "3")]
        pub user: ::core::option::Option<::prost::alloc::string::String>,
        #[prost(int64, optional, tag = "4")]
        pub uid: ::core::option::Option<i64>,
        #[prost(int64, optional, tag = "5")]
        pub task_id: ::core::option::Option<i64>,
        #[prost(int64, optional, tag = "6")]
        pub task_uid: ::core::option::Option<i64>,
        #[prost(int64, optional, tag = "7")]
        pub process_id: ::core::option::Option<i64>,
        #[prost(int64, optional, tag = "8")]
        pub thread_id: ::core::option::Option<i64>,
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct TagMetric {
        #[prost(string, tag = "1")]
        pub key: ::prost::alloc::string::String,
        #[prost(string, tag = "2")]
        pub value: ::prost::alloc::string::String,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct CompilationLogEntry {
        #[prost(message, optional, tag = "1")]
        pub timestamp: ::core::option::Option<super::google::protobuf::Timestamp>,
        #[prost(enumeration = "compilation_log_entry::CompilationStage", tag = "2")]
        pub stage: i32,
        #[prost(message, optional, tag = "3")]
        pub duration: ::core::option::Option<super::google::protobuf::Duration>,
        #[prost(int32, tag = "4")]
        pub task_index: i32,
        #[prost(message, repeated, tag = "5")]
        pub pass_metrics: ::prost::alloc::vec::Vec<PassMetrics>,
        #[prost(uint64, repeated, tag = "6")]
        pub module_ids: ::prost::alloc::vec::Vec<u64>,
        #[prost(message, optional, tag = "7")]
        pub job_info: ::core::option::Option<JobInfo>,
        #[prost(string, tag = "8")]
        pub hlo_module_name: ::prost::alloc::string::String,
        #[prost(message, repeated, tag = "9")]
        pub tag: ::prost::alloc::vec::Vec<TagMetric>,
    }
    /// Nested message and enum types in `CompilationLogEntry`.
    pub mod compilation_log_entry {
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration,
        )]
        #[repr(i32)]
        pub enum CompilationStage {
            Unspecified = 0,
            EndToEnd = 1,
            HloPasses = 2,
            CodeGeneration = 3,
            BackendPasses = 4,
        }
        impl CompilationStage {
            /// String value of the enum field names used in the ProtoBuf definition.
            ///
            /// The values are not transformed in any way and thus are considered stable
            /// (if the ProtoBuf definition does not change) and safe for programmatic use.
            pub fn as_str_name(&self) -> &'static str {
                match self {
                    Self::Unspecified => "UNSPECIFIED",
                    Self::EndToEnd => "END_TO_END",
                    Self::HloPasses => "HLO_PASSES",
                    Self::CodeGeneration => "CODE_GENERATION",
                    Self::BackendPasses => "BACKEND_PASSES",
                }
            }
            /// Creates an enum from field names used in the ProtoBuf definition.
            pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
                match value {
                    "UNSPECIFIED" => Some(Self::Unspecified),
                    "END_TO_END" => Some(Self::EndToEnd),
                    "HLO_PASSES" => Some(Self::HloPasses),
                    "CODE_GENERATION" => Some(Self::CodeGeneration),
                    "BACKEND_PASSES" => Some(Self::BackendPasses),
                    _ => None,
                }
            }
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HloInstructionProto {
        #[prost(string, tag = "1")]
        pub name: ::prost::alloc::string::String,
        #[prost(string, tag = "2")]
        pub opcode: ::prost::alloc::string::String,
        #[prost(message, optional, tag = "3")]
        pub shape: ::core::option::Option<ShapeProto>,
        #[prost(message, optional, tag = "7")]
        pub metadata: ::core::option::Option<OpMetadata>,
        #[prost(message, optional, tag = "8")]
        pub literal: ::core::option::Option<LiteralProto>,
        #[prost(int64, tag = "9")]
        pub parameter_number: i64,
        #[prost(string, tag = "11")]
        pub fusion_kind: ::prost::alloc::string::String,
        #[prost(int64, tag = "13")]
        pub tuple_index: i64,
        #[prost(int64, repeated, tag = "14")]
        pub dimensions: ::prost::alloc::vec::Vec<i64>,
        #[prost(message, optional, tag = "15")]
        pub window: ::core::option::Option<Window>,
        #[prost(message, optional, tag = "16")]
        pub convolution_dimension_numbers: ::core::option::Option<ConvolutionDimensionNumbers>,
        #[prost(int64, tag = "50")]
        pub feature_group_count: i64,
        #[prost(int64, tag = "58")]
        pub batch_group_count: i64,
        #[prost(message, repeated, tag = "17")]
        pub slice_dimensions: ::prost::alloc::vec::Vec<hlo_instruction_proto::SliceDimensions>,
        #[prost(int32, tag = "18")]
        pub exponent_bits: i32,
        #[prost(int32, tag = "19")]
        pub mantissa_bits: i32,
        #[prost(int64, repeated, tag = "20")]
        pub dynamic_slice_sizes: ::prost::alloc::vec::Vec<i64>,
        #[prost(message, optional, tag = "21")]
        pub padding_config: ::core::option::Option<PaddingConfig>,
        #[prost(bytes = "vec", tag = "22")]
        pub outfeed_config: ::prost::alloc::vec::Vec<u8>,
        #[prost(enumeration = "RandomDistribution", tag = "23")]
        pub distribution: i32,
        #[prost(float, tag = "24")]
        pub epsilon: f32,
        #[prost(int64, tag = "25")]
        pub feature_index: i64,
        #[prost(int64, tag = "26")]
        pub channel_id: i64,
        #[prost(bytes = "vec", tag = "27")]
        pub infeed_config: ::prost::alloc::vec::Vec<u8>,
        #[prost(string, tag = "28")]
        pub custom_call_target: ::prost::alloc::string::String,
        #[prost(message, optional, tag = "29")]
        pub outfeed_shape: ::core::option::Option<ShapeProto>,
        #[prost(message, optional, tag = "30")]
        pub dot_dimension_numbers: ::core::option::Option<DotDimensionNumbers>,
        #[prost(message, optional, tag = "90")]
        pub ragged_dot_dimension_numbers: ::core::option::Option<RaggedDotDimensionNumbers>,
        #[prost(enumeration = "FftType", tag = "31")]
        pub fft_type: i32,
        #[prost(int64, repeated, tag = "32")]
        pub fft_length: ::prost::alloc::vec::Vec<i64>,
        #[prost(string, tag = "63")]
        pub comparison_direction: ::prost::alloc::string::String,
        #[prost(message, optional, tag = "33")]
        pub gather_dimension_numbers: ::core::option::Option<GatherDimensionNumbers>,
        #[prost(int64, repeated, tag = "34")]
        pub gather_slice_sizes: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, tag = "35")]
        pub id: i64,
        #[prost(int64, repeated, tag = "36")]
        pub operand_ids: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, repeated, tag = "37")]
        pub control_predecessor_ids: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, repeated, tag = "38")]
        pub called_computation_ids: ::prost::alloc::vec::Vec<i64>,
        #[prost(message, optional, tag = "40")]
        pub sharding: ::core::option::Option<OpSharding>,
        #[prost(bytes = "vec", tag = "43")]
        pub backend_config: ::prost::alloc::vec::Vec<u8>,
        #[prost(message, optional, tag = "99")]
        pub backend_config_payload: ::core::option::Option<Payload>,
        #[deprecated]
        #[prost(message, repeated, tag = "49")]
        pub replica_groups: ::prost::alloc::vec::Vec<ReplicaGroup>,
        #[deprecated]
        #[prost(int64, tag = "45")]
        pub all_reduce_id: i64,
        #[prost(bool, tag = "71")]
        pub use_global_device_ids: bool,
        #[prost(bool, tag = "47")]
        pub is_host_transfer: bool,
        #[prost(bool, tag = "60")]
        pub is_stable: bool,
        #[prost(message, optional, tag = "48")]
        pub scatter_dimension_numbers: ::core::option::Option<ScatterDimensionNumbers>,
        #[prost(message, optional, tag = "51")]
        pub precision_config: ::core::option::Option<PrecisionConfig>,
        #[prost(message, repeated, tag = "52")]
        pub source_target_pairs: ::prost::alloc::vec::Vec<SourceTarget>,
        #[prost(message, optional, tag = "54")]
        pub domain_entry_sharding: ::core::option::Option<OpSharding>,
        #[prost(message, optional, tag = "55")]
        pub domain_exit_sharding: ::core::option::Option<OpSharding>,
        #[prost(bool, tag = "56")]
        pub constrain_layout: bool,
        #[prost(message, repeated, tag = "57")]
        pub operand_shapes_with_layout: ::prost::alloc::vec::Vec<ShapeProto>,
        #[prost(message, optional, tag = "59")]
        pub triangular_solve_options: ::core::option::Option<TriangularSolveOptions>,
        #[prost(message, optional, tag = "62")]
        pub cholesky_options: ::core::option::Option<CholeskyOptions>,
        #[prost(message, optional, tag = "61")]
        pub parameter_replication: ::core::option::Option<ParameterReplication>,
        #[prost(bool, tag = "65")]
        pub custom_call_has_side_effect: bool,
        #[prost(message, repeated, tag = "74")]
        pub output_operand_aliasing: ::prost::alloc::vec::Vec<OutputOperandAliasing>,
        #[prost(enumeration = "CustomCallSchedule", tag = "76")]
        pub custom_call_schedule: i32,
        #[prost(int64, tag = "66")]
        pub delta: i64,
        #[prost(bool, tag = "67")]
        pub indices_are_sorted: bool,
        #[prost(message, optional, tag = "68")]
        pub frontend_attributes: ::core::option::Option<FrontendAttributes>,
        #[prost(bool, tag = "69")]
        pub unique_indices: bool,
        #[prost(enumeration = "RandomAlgorithm", tag = "70")]
        pub rng_algorithm: i32,
        #[prost(string, tag = "72")]
        pub comparison_type: ::prost::alloc::string::String,
        #[deprecated]
        #[prost(bool, tag = "73")]
        pub is_cross_program_prefetch: bool,
        #[prost(enumeration = "PaddingType", tag = "75")]
        pub padding_type: i32,
        #[prost(enumeration = "CustomCallApiVersion", tag = "77")]
        pub custom_call_api_version: i32,
        #[prost(string, tag = "79")]
        pub async_execution_thread: ::prost::alloc::string::String,
        #[prost(int64, tag = "81")]
        pub k: i64,
        #[prost(bool, tag = "85")]
        pub largest: bool,
        #[prost(message, optional, tag = "82")]
        pub statistics_viz: ::core::option::Option<StatisticsViz>,
        #[prost(message, optional, tag = "88")]
        pub original_value: ::core::option::Option<OriginalValueProto>,
        #[prost(bool, tag = "89")]
        pub is_composite: bool,
        #[prost(message, optional, tag = "91")]
        pub result_accuracy: ::core::option::Option<ResultAccuracy>,
        #[prost(bool, tag = "94")]
        pub is_reverse: bool,
        #[prost(int64, tag = "95")]
        pub num_carries: i64,
        #[prost(enumeration = "TriState", tag = "96")]
        pub is_associative: i32,
        #[prost(enumeration = "ConvolutionKind", tag = "97")]
        pub conv_kind: i32,
        #[prost(message, optional, tag = "98")]
        pub sparsity_config: ::core::option::Option<SparsityConfig>,
        #[prost(
            oneof = "hlo_instruction_proto::OptionalCrossProgramPrefetchIndex",
            tags = "80"
        )]
        pub optional_cross_program_prefetch_index:
            ::core::option::Option<hlo_instruction_proto::OptionalCrossProgramPrefetchIndex>,
        #[prost(oneof = "hlo_instruction_proto::ReplicaGroupList", tags = "87, 92, 93")]
        pub replica_group_list: ::core::option::Option<hlo_instruction_proto::ReplicaGroupList>,
    }
    /// Nested message and enum types in `HloInstructionProto`.
    pub mod hlo_instruction_proto {
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct SliceDimensions {
            #[prost(int64, tag = "1")]
            pub start: i64,
            #[prost(int64, tag = "2")]
            pub limit: i64,
            #[prost(int64, tag = "3")]
            pub stride: i64,
        }
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Oneof)]
        pub enum OptionalCrossProgramPrefetchIndex {
            #[prost(int32, tag = "80")]
            CrossProgramPrefetchIndex(i32),
        }
        #[derive(Clone, PartialEq, ::prost::Oneof)]
        pub enum ReplicaGroupList {
            #[prost(message, tag = "87")]
            CollectiveDeviceList(super::CollectiveDeviceListProto),
            #[prost(message, tag = "92")]
            IotaCollectiveDeviceList(super::IotaReplicaGroupListProto),
            #[prost(message, tag = "93")]
            MeshAxesReplicaGroupList(super::MeshAxesReplicaGroupListProto),
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HloComputationProto {
        #[prost(string, tag = "1")]
        pub name: ::prost::alloc::string::String,
        #[prost(message, repeated, tag = "2")]
        pub instructions: ::prost::alloc::vec::Vec<HloInstructionProto>,
        #[prost(message, optional, tag = "4")]
        pub program_shape: ::core::option::Option<ProgramShapeProto>,
        #[prost(int64, tag = "5")]
        pub id: i64,
        #[prost(int64, tag = "6")]
        pub root_id: i64,
        #[prost(bool, tag = "7")]
        pub is_fusion_computation: bool,
        #[prost(string, tag = "8")]
        pub execution_thread: ::prost::alloc::string::String,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HloScheduleProto {
        #[prost(btree_map = "int64, message", tag = "1")]
        pub sequences:
            ::prost::alloc::collections::BTreeMap<i64, hlo_schedule_proto::InstructionSequence>,
    }
    /// Nested message and enum types in `HloScheduleProto`.
    pub mod hlo_schedule_proto {
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct InstructionSequence {
            #[prost(int64, repeated, tag = "1")]
            pub instruction_ids: ::prost::alloc::vec::Vec<i64>,
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HloInputOutputAliasProto {
        #[prost(message, repeated, tag = "1")]
        pub entries: ::prost::alloc::vec::Vec<hlo_input_output_alias_proto::AliasEntryProto>,
    }
    /// Nested message and enum types in `HloInputOutputAliasProto`.
    pub mod hlo_input_output_alias_proto {
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct AliasEntryProto {
            #[prost(int64, repeated, tag = "1")]
            pub output_shape_index: ::prost::alloc::vec::Vec<i64>,
            #[prost(int64, tag = "2")]
            pub parameter_number: i64,
            #[prost(int64, repeated, tag = "3")]
            pub parameter_shape_index: ::prost::alloc::vec::Vec<i64>,
            #[prost(enumeration = "super::Kind", tag = "4")]
            pub kind: i32,
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HloBufferDonorProto {
        #[prost(message, repeated, tag = "1")]
        pub entries: ::prost::alloc::vec::Vec<hlo_buffer_donor_proto::BufferDonorEntryProto>,
    }
    /// Nested message and enum types in `HloBufferDonorProto`.
    pub mod hlo_buffer_donor_proto {
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct BufferDonorEntryProto {
            #[prost(int64, tag = "1")]
            pub parameter_number: i64,
            #[prost(int64, repeated, tag = "2")]
            pub parameter_shape_index: ::prost::alloc::vec::Vec<i64>,
        }
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct CrossProgramPrefetch {
        #[prost(int64, tag = "1")]
        pub parameter: i64,
        #[prost(int64, repeated, tag = "2")]
        pub index: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, tag = "3")]
        pub offset: i64,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct StackFrameIndexProto {
        #[prost(string, repeated, tag = "1")]
        pub file_names: ::prost::alloc::vec::Vec<::prost::alloc::string::String>,
        #[prost(string, repeated, tag = "2")]
        pub function_names: ::prost::alloc::vec::Vec<::prost::alloc::string::String>,
        #[prost(message, repeated, tag = "3")]
        pub file_locations: ::prost::alloc::vec::Vec<stack_frame_index_proto::FileLocation>,
        #[prost(message, repeated, tag = "4")]
        pub stack_frames: ::prost::alloc::vec::Vec<stack_frame_index_proto::StackFrame>,
    }
    /// Nested message and enum types in `StackFrameIndexProto`.
    pub mod stack_frame_index_proto {
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct FileLocation {
            #[prost(int32, tag = "1")]
            pub file_name_id: i32,
            #[prost(int32, tag = "2")]
            pub function_name_id: i32,
            #[prost(int32, tag = "3")]
            pub line: i32,
            #[prost(int32, tag = "5")]
            pub end_line: i32,
            #[prost(int32, tag = "4")]
            pub column: i32,
            #[prost(int32, tag = "6")]
            pub end_column: i32,
        }
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct StackFrame {
            #[prost(int32, tag = "1")]
            pub file_location_id: i32,
            #[prost(int32, tag = "2")]
            pub parent_frame_id: i32,
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HloModuleProto {
        #[prost(string, tag = "1")]
        pub name: ::prost::alloc::string::String,
        #[prost(string, tag = "2")]
        pub entry_computation_name: ::prost::alloc::string::String,
        #[prost(int64, tag = "6")]
        pub entry_computation_id: i64,
        #[prost(message, repeated, tag = "3")]
        pub computations: ::prost::alloc::vec::Vec<HloComputationProto>,
        #[prost(message, optional, tag = "4")]
        pub host_program_shape: ::core::option::Option<ProgramShapeProto>,
        #[prost(int64, tag = "5")]
        pub id: i64,
        #[prost(int64, optional, tag = "23")]
        pub pjrt_id: ::core::option::Option<i64>,
        #[prost(message, optional, tag = "7")]
        pub schedule: ::core::option::Option<HloScheduleProto>,
        #[prost(message, optional, tag = "8")]
        pub input_output_alias: ::core::option::Option<HloInputOutputAliasProto>,
        #[prost(bytes = "vec", repeated, tag = "22")]
        pub payloads: ::prost::alloc::vec::Vec<::prost::alloc::vec::Vec<u8>>,
        #[prost(message, optional, tag = "18")]
        pub buffer_donor: ::core::option::Option<HloBufferDonorProto>,
        #[prost(message, repeated, tag = "10")]
        pub cross_program_prefetches: ::prost::alloc::vec::Vec<CrossProgramPrefetch>,
        #[prost(bool, tag = "11")]
        pub is_dynamic: bool,
        #[prost(message, optional, tag = "12")]
        pub spmd_output_sharding: ::core::option::Option<OpSharding>,
        #[prost(message, repeated, tag = "14")]
        pub spmd_parameters_shardings: ::prost::alloc::vec::Vec<OpSharding>,
        #[prost(bool, tag = "16")]
        pub use_auto_spmd_partitioning: bool,
        #[prost(message, repeated, tag = "13")]
        pub profile_info: ::prost::alloc::vec::Vec<hlo_module_proto::ProfileInfo>,
        #[prost(message, optional, tag = "15")]
        pub device_assignment: ::core::option::Option<DeviceAssignmentProto>,
        #[prost(message, optional, tag = "17")]
        pub stack_frame_index: ::core::option::Option<StackFrameIndexProto>,
        #[prost(message, optional, tag = "19")]
        pub frontend_attributes: ::core::option::Option<FrontendAttributes>,
        #[prost(message, optional, tag = "20")]
        pub original_value_recovery_table: ::core::option::Option<OriginalValueRecoveryTableProto>,
        #[prost(string, tag = "21")]
        pub device_type: ::prost::alloc::string::String,
    }
    /// Nested message and enum types in `HloModuleProto`.
    pub mod hlo_module_proto {
        #[derive(Clone, PartialEq, ::prost::Message)]
        pub struct ProfileInfo {
            #[prost(enumeration = "ProfileType", tag = "1")]
            pub profile_type: i32,
            #[prost(double, tag = "2")]
            pub relative_speedup: f64,
            #[prost(enumeration = "super::ProfileSource", tag = "3")]
            pub profile_source: i32,
            #[prost(enumeration = "super::CompilationEvent", tag = "4")]
            pub compilation_event: i32,
            #[prost(string, tag = "5")]
            pub fingerprint: ::prost::alloc::string::String,
            #[prost(enumeration = "super::ProfileGenerationStrategy", tag = "6")]
            pub profile_generation_strategy: i32,
            #[prost(int64, tag = "7")]
            pub original_changelist: i64,
            #[prost(int64, tag = "8")]
            pub changelist: i64,
        }
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration,
        )]
        #[repr(i32)]
        pub enum ProfileType {
            Invalid = 0,
            Flag = 1,
            Fusion = 2,
            Layout = 3,
            Dot = 4,
            Flagnet = 5,
            Sharding = 6,
            Schedule = 7,
        }
        impl ProfileType {
            /// String value of the enum field names used in the ProtoBuf definition.
            ///
            /// The values are not transformed in any way and thus are considered stable
            /// (if the ProtoBuf definition does not change) and safe for programmatic use.
            pub fn as_str_name(&self) -> &'static str {
                match self {
                    Self::Invalid => "INVALID",
                    Self::Flag => "FLAG",
                    Self::Fusion => "FUSION",
                    Self::Layout => "LAYOUT",
                    Self::Dot => "DOT",
                    Self::Flagnet => "FLAGNET",
                    Self::Sharding => "SHARDING",
                    Self::Schedule => "SCHEDULE",
                }
            }
            /// Creates an enum from field names used in the ProtoBuf definition.
            pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
                match value {
                    "INVALID" => Some(Self::Invalid),
                    "FLAG" => Some(Self::Flag),
                    "FUSION" => Some(Self::Fusion),
                    "LAYOUT" => Some(Self::Layout),
                    "DOT" => Some(Self::Dot),
                    "FLAGNET" => Some(Self::Flagnet),
                    "SHARDING" => Some(Self::Sharding),
                    "SCHEDULE" => Some(Self::Schedule),
                    _ => None,
                }
            }
        }
    }
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct LogicalBufferProto {
        #[prost(int64, tag = "1")]
        pub id: i64,
        #[prost(int64, tag = "2")]
        pub size: i64,
        #[prost(message, optional, tag = "3")]
        pub defined_at: ::core::option::Option<logical_buffer_proto::Location>,
        #[prost(int64, tag = "4")]
        pub color: i64,
    }
    /// Nested message and enum types in `LogicalBufferProto`.
    pub mod logical_buffer_proto {
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct Location {
            #[deprecated]
            #[prost(string, tag = "2")]
            pub instruction_name: ::prost::alloc::string::String,
            #[prost(int64, tag = "4")]
            pub instruction_id: i64,
            #[prost(int64, repeated, tag = "3")]
            pub shape_index: ::prost::alloc::vec::Vec<i64>,
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct BufferAllocationProto {
        #[prost(int64, tag = "1")]
        pub index: i64,
        #[prost(int64, tag = "2")]
        pub size: i64,
        #[prost(bool, tag = "3")]
        pub is_thread_local: bool,
        #[prost(bool, tag = "11")]
        pub is_tuple: bool,
        #[prost(bool, tag = "5")]
        pub is_entry_computation_parameter: bool,
        #[prost(bool, tag = "12")]
        pub is_constant: bool,
        #[prost(int64, tag = "6")]
        pub parameter_number: i64,
        #[prost(int64, repeated, tag = "10")]
        pub parameter_shape_index: ::prost::alloc::vec::Vec<i64>,
        #[prost(bool, tag = "13")]
        pub is_parameter_aliased_with_output: bool,
        #[prost(bool, tag = "7")]
        pub maybe_live_out: bool,
        #[prost(int64, tag = "8")]
        pub color: i64,
        #[prost(message, repeated, tag = "9")]
        pub assigned: ::prost::alloc::vec::Vec<buffer_allocation_proto::Assigned>,
    }
    /// Nested message and enum types in `BufferAllocationProto`.
    pub mod buffer_allocation_proto {
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct Assigned {
            #[prost(int64, tag = "1")]
            pub logical_buffer_id: i64,
            #[prost(int64, tag = "2")]
            pub offset: i64,
            #[prost(int64, tag = "3")]
            pub size: i64,
            #[prost(enumeration = "super::PrimitiveType", tag = "4")]
            pub element_type: i32,
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HeapSimulatorTrace {
        #[prost(message, repeated, tag = "1")]
        pub events: ::prost::alloc::vec::Vec<heap_simulator_trace::Event>,
        #[prost(bool, tag = "2")]
        pub whole_module_simulation: bool,
        #[prost(int64, tag = "3")]
        pub buffer_allocation_index: i64,
    }
    /// Nested message and enum types in `HeapSimulatorTrace`.
    pub mod heap_simulator_trace {
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct Event {
            #[prost(enumeration = "event::Kind", tag = "1")]
            pub kind: i32,
            #[prost(int64, tag = "2")]
            pub buffer_id: i64,
            #[prost(string, tag = "3")]
            pub computation_name: ::prost::alloc::string::String,
            #[prost(string, tag = "4")]
            pub instruction_name: ::prost::alloc::string::String,
            #[prost(int64, tag = "5")]
            pub share_with_canonical_id: i64,
        }
        /// Nested message and enum types in `Event`.
        pub mod event {
            #[derive(
                Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration,
            )]
            #[repr(i32)]
            pub enum Kind {
                Alloc = 0,
                Free = 1,
                ShareWith = 2,
            }
            impl Kind {
                /// String value of the enum field names used in the ProtoBuf definition.
                ///
                /// The values are not transformed in any way and thus are considered stable
                /// (if the ProtoBuf definition does not change) and safe for programmatic use.
                pub fn as_str_name(&self) -> &'static str {
                    match self {
                        Self::Alloc => "ALLOC",
                        Self::Free => "FREE",
                        Self::ShareWith => "SHARE_WITH",
                    }
                }
                /// Creates an enum from field names used in the ProtoBuf definition.
                pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
                    match value {
                        "ALLOC" => Some(Self::Alloc),
                        "FREE" => Some(Self::Free),
                        "SHARE_WITH" => Some(Self::ShareWith),
                        _ => None,
                    }
                }
            }
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HloModuleGroupProto {
        #[prost(string, tag = "1")]
        pub name: ::prost::alloc::string::String,
        #[prost(message, repeated, tag = "2")]
        pub hlo_modules: ::prost::alloc::vec::Vec<HloModuleProto>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct MemoryUsageReportProto {
        #[prost(message, repeated, tag = "1")]
        pub memory_space_allocation_entries:
            ::prost::alloc::vec::Vec<memory_usage_report_proto::AllocationEntryInMemorySpace>,
    }
    /// Nested message and enum types in `MemoryUsageReportProto`.
    pub mod memory_usage_report_proto {
        #[derive(Clone, PartialEq, ::prost::Message)]
        pub struct AllocationEntry {
            #[prost(int64, tag = "1")]
            pub index: i64,
            #[prost(int64, tag = "2")]
            pub size: i64,
            #[prost(int64, tag = "3")]
            pub cumulative_size: i64,
            #[prost(double, tag = "4")]
            pub cumulative_percentage: f64,
            #[prost(string, repeated, tag = "5")]
            pub defining_positions: ::prost::alloc::vec::Vec<::prost::alloc::string::String>,
            #[prost(string, tag = "6")]
            pub hlo_text: ::prost::alloc::string::String,
        }
        #[derive(Clone, PartialEq, ::prost::Message)]
        pub struct AllocationEntryInMemorySpace {
            #[prost(int64, tag = "1")]
            pub total_bytes: i64,
            #[prost(int32, optional, tag = "2")]
            pub memory_space_color: ::core::option::Option<i32>,
            #[prost(message, repeated, tag = "3")]
            pub allocation_entries: ::prost::alloc::vec::Vec<AllocationEntry>,
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct BufferAssignmentProto {
        #[prost(message, repeated, tag = "1")]
        pub logical_buffers: ::prost::alloc::vec::Vec<LogicalBufferProto>,
        #[prost(message, repeated, tag = "2")]
        pub buffer_aliases: ::prost::alloc::vec::Vec<buffer_assignment_proto::BufferAlias>,
        #[prost(message, repeated, tag = "3")]
        pub buffer_allocations: ::prost::alloc::vec::Vec<BufferAllocationProto>,
        #[prost(message, repeated, tag = "4")]
        pub heap_simulator_traces: ::prost::alloc::vec::Vec<HeapSimulatorTrace>,
        #[prost(message, repeated, tag = "5")]
        pub peak_buffers: ::prost::alloc::vec::Vec<buffer_assignment_proto::PeakBuffers>,
    }
    /// Nested message and enum types in `BufferAssignmentProto`.
    pub mod buffer_assignment_proto {
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct BufferAlias {
            #[prost(int64, tag = "1")]
            pub source_buffer_id: i64,
            #[prost(message, optional, tag = "2")]
            pub location: ::core::option::Option<super::logical_buffer_proto::Location>,
        }
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct PeakBuffers {
            #[prost(int64, tag = "1")]
            pub index: i64,
            #[prost(int64, repeated, tag = "2")]
            pub logical_buffer_ids: ::prost::alloc::vec::Vec<i64>,
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HloProto {
        #[prost(message, optional, tag = "1")]
        pub hlo_module: ::core::option::Option<HloModuleProto>,
        #[prost(message, optional, tag = "3")]
        pub buffer_assignment: ::core::option::Option<BufferAssignmentProto>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HloSnapshot {
        #[prost(message, optional, tag = "1")]
        pub hlo: ::core::option::Option<HloProto>,
        #[prost(message, repeated, tag = "2")]
        pub arguments: ::prost::alloc::vec::Vec<LiteralProto>,
        #[prost(message, optional, tag = "3")]
        pub result: ::core::option::Option<LiteralProto>,
        #[prost(string, tag = "4")]
        pub execution_platform: ::prost::alloc::string::String,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HloInputs {
        #[prost(message, repeated, tag = "1")]
        pub arguments: ::prost::alloc::vec::Vec<LiteralProto>,
        #[prost(message, repeated, tag = "2")]
        pub arguments_descriptors: ::prost::alloc::vec::Vec<hlo_inputs::LiteralDescriptor>,
    }
    /// Nested message and enum types in `HloInputs`.
    pub mod hlo_inputs {
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct LiteralDescriptor {
            #[prost(int32, tag = "1")]
            pub version: i32,
            #[prost(uint64, tag = "2")]
            pub argument_size_bytes: u64,
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HloUnoptimizedSnapshot {
        #[prost(message, optional, tag = "1")]
        pub hlo_module: ::core::option::Option<HloModuleProto>,
        #[prost(message, repeated, tag = "2")]
        pub partitions: ::prost::alloc::vec::Vec<HloInputs>,
        #[prost(int32, tag = "3")]
        pub version: i32,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HloModuleMetadataProto {
        #[prost(int64, tag = "1")]
        pub canonical_module_id: i64,
        #[prost(string, tag = "2")]
        pub module_group_name: ::prost::alloc::string::String,
        #[prost(int64, tag = "3")]
        pub original_module_id: i64,
        #[prost(int64, repeated, tag = "4")]
        pub partitioned_module_ids: ::prost::alloc::vec::Vec<i64>,
        #[prost(message, repeated, tag = "5")]
        pub pass_metadata: ::prost::alloc::vec::Vec<HloPassMetadata>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct HloPassMetadata {
        #[prost(int64, tag = "1")]
        pub pass_id: i64,
        #[prost(string, tag = "2")]
        pub pass_name: ::prost::alloc::string::String,
        #[prost(string, tag = "3")]
        pub pipeline_name: ::prost::alloc::string::String,
        #[prost(string, repeated, tag = "4")]
        pub dump_filenames: ::prost::alloc::vec::Vec<::prost::alloc::string::String>,
        #[prost(bool, tag = "5")]
        pub module_changed: bool,
        #[prost(int64, tag = "6")]
        pub module_id: i64,
        #[prost(int64, repeated, tag = "7")]
        pub module_group_module_ids: ::prost::alloc::vec::Vec<i64>,
        #[prost(int64, tag = "8")]
        pub start_timestamp_usec: i64,
        #[prost(int64, tag = "9")]
        pub end_timestamp_usec: i64,
        #[prost(message, optional, tag = "10")]
        pub custom_metadata: ::core::option::Option<super::google::protobuf::Any>,
        #[prost(message, repeated, tag = "11")]
        pub kv_metrics: ::prost::alloc::vec::Vec<KeyValueMetric>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct OriginalValueRecoveryTableProto {
        #[prost(message, repeated, tag = "1")]
        pub entries: ::prost::alloc::vec::Vec<original_value_recovery_table_proto::Entry>,
    }
    /// Nested message and enum types in `OriginalValueRecoveryTableProto`.
    pub mod original_value_recovery_table_proto {
        #[derive(Clone, PartialEq, ::prost::Message)]
        pub struct Entry {
            #[prost(message, optional, tag = "1")]
            pub old_original_array: ::core::option::Option<super::OriginalArrayProto>,
            #[prost(message, optional, tag = "2")]
            pub new_original_array: ::core::option::Option<super::OriginalArrayProto>,
            #[prost(message, optional, tag = "3")]
            pub recovery_module: ::core::option::Option<super::HloModuleProto>,
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum CustomCallSchedule {
        ScheduleNone = 0,
        ScheduleLatest = 1,
        ScheduleEarliest = 2,
    }
    impl CustomCallSchedule {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::ScheduleNone => "SCHEDULE_NONE",
                Self::ScheduleLatest => "SCHEDULE_LATEST",
                Self::ScheduleEarliest => "SCHEDULE_EARLIEST",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "SCHEDULE_NONE" => Some(Self::ScheduleNone),
                "SCHEDULE_LATEST" => Some(Self::ScheduleLatest),
                "SCHEDULE_EARLIEST" => Some(Self::ScheduleEarliest),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum TriState {
        Unspecified = 0,
        True = 1,
        False = 2,
    }
    impl TriState {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::Unspecified => "TRI_STATE_UNSPECIFIED",
                Self::True => "TRI_STATE_TRUE",
                Self::False => "TRI_STATE_FALSE",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "TRI_STATE_UNSPECIFIED" => Some(Self::Unspecified),
                "TRI_STATE_TRUE" => Some(Self::True),
                "TRI_STATE_FALSE" => Some(Self::False),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum ConvolutionKind {
        Unset = 0,
        Fprop = 1,
        Dgrad = 2,
        Wgrad = 3,
    }
    impl ConvolutionKind {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::Unset => "CONVOLUTION_KIND_UNSET",
                Self::Fprop => "CONVOLUTION_KIND_FPROP",
                Self::Dgrad => "CONVOLUTION_KIND_DGRAD",
                Self::Wgrad => "CONVOLUTION_KIND_WGRAD",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "CONVOLUTION_KIND_UNSET" => Some(Self::Unset),
                "CONVOLUTION_KIND_FPROP" => Some(Self::Fprop),
                "CONVOLUTION_KIND_DGRAD" => Some(Self::Dgrad),
                "CONVOLUTION_KIND_WGRAD" => Some(Self::Wgrad),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum CustomCallApiVersion {
        ApiVersionUnspecified = 0,
        ApiVersionOriginal = 1,
        ApiVersionStatusReturning = 2,
        ApiVersionStatusReturningUnified = 3,
        ApiVersionTypedFfi = 4,
    }
    impl CustomCallApiVersion {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::ApiVersionUnspecified => "API_VERSION_UNSPECIFIED",
                Self::ApiVersionOriginal => "API_VERSION_ORIGINAL",
                Self::ApiVersionStatusReturning => "API_VERSION_STATUS_RETURNING",
                Self::ApiVersionStatusReturningUnified => "API_VERSION_STATUS_RETURNING_UNIFIED",
                Self::ApiVersionTypedFfi => "API_VERSION_TYPED_FFI",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "API_VERSION_UNSPECIFIED" => Some(Self::ApiVersionUnspecified),
                "API_VERSION_ORIGINAL" => Some(Self::ApiVersionOriginal),
                "API_VERSION_STATUS_RETURNING" => Some(Self::ApiVersionStatusReturning),
                "API_VERSION_STATUS_RETURNING_UNIFIED" => {
                    Some(Self::ApiVersionStatusReturningUnified)
                }
                "API_VERSION_TYPED_FFI" => Some(Self::ApiVersionTypedFfi),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum Kind {
        UndefinedAlias = 0,
        MayAlias = 1,
        MustAlias = 2,
    }
    impl Kind {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::UndefinedAlias => "UNDEFINED_ALIAS",
                Self::MayAlias => "MAY_ALIAS",
                Self::MustAlias => "MUST_ALIAS",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "UNDEFINED_ALIAS" => Some(Self::UndefinedAlias),
                "MAY_ALIAS" => Some(Self::MayAlias),
                "MUST_ALIAS" => Some(Self::MustAlias),
                _ => None,
            }
        }
    }
}

/// Package `google.protobuf` (the well-known types `xla` uses).
pub mod google {
    /// Package `google.protobuf`.
    pub mod protobuf {
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct Any {
            #[prost(string, tag = "1")]
            pub type_url: ::prost::alloc::string::String,
            #[prost(bytes = "vec", tag = "2")]
            pub value: ::prost::alloc::vec::Vec<u8>,
        }
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct Duration {
            #[prost(int64, tag = "1")]
            pub seconds: i64,
            #[prost(int32, tag = "2")]
            pub nanos: i32,
        }
        #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct Timestamp {
            #[prost(int64, tag = "1")]
            pub seconds: i64,
            #[prost(int32, tag = "2")]
            pub nanos: i32,
        }
    }
}
