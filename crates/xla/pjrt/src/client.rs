//! Clients, executables and the buffers that carry host tensors in and out.

use std::ffi::c_char;
use std::ptr::null_mut;
use std::sync::{Arc, OnceLock};

use graphbug_files::HostTensor;

use crate::plugin::{call, text, Api, Attribute, Plugin};
use crate::sharding::{self, CompileOptions, Disagreement, Partitioning, Sharding};
use crate::sys::{self, PJRT_Buffer, PJRT_Device};
use crate::{proto, ElementType, Error, TensorSpec};

/// The format of a program given to [`Client::compile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// StableHLO (or any MLIR the plugin takes): text, generic or pretty, or bytecode.
    Mlir,
    /// A serialized `xla.HloModuleProto` (HLO text is not accepted by plugins).
    Hlo,
}

impl Format {
    /// The name PJRT gives the format (`mlir`, `hlo`).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Mlir => "mlir",
            Format::Hlo => "hlo",
        }
    }
}

/// A device a client sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// The device id (`PJRT_DeviceDescription_Id`).
    pub id: i32,
    /// The vendor's kind of device (`PJRT_DeviceDescription_Kind`), e.g. `cpu`.
    pub kind: String,
    /// A short description (`PJRT_DeviceDescription_ToString`), e.g. `CpuDevice(id=0)`.
    pub description: String,
}

struct ClientInner {
    api: Arc<Api>,
    ptr: *mut sys::PJRT_Client,
}

// SAFETY: PJRT clients are thread-safe.
unsafe impl Send for ClientInner {}
// SAFETY: as above.
unsafe impl Sync for ClientInner {}

impl Drop for ClientInner {
    fn drop(&mut self) {
        let mut args = sys::PJRT_Client_Destroy_Args::new();
        args.client = self.ptr;
        let _ = call!(&self.api, PJRT_Client_Destroy, &mut args);
    }
}

/// A PJRT client of a plugin (`PJRT_Client_Create`); destroyed when it and every executable
/// compiled with it are dropped.
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

impl Client {
    /// Creates a client of `plugin` with the plugin's default options.
    pub fn new(plugin: &Plugin) -> Result<Client, Error> {
        Client::with_options(plugin, &[])
    }

    /// Creates a client of `plugin` with `PJRT_Client_Create`'s `create_options`, named
    /// values whose meaning is the plugin's (XLA's GPU plugin: `preallocate`,
    /// `memory_fraction`, `allocator`; its CPU plugin: `cpu_device_count`). What a plugin
    /// does with an option it does not know is its own (XLA's CPU plugin ignores one, and
    /// aborts on a value of the wrong type).
    pub fn with_options(plugin: &Plugin, options: &[(String, Attribute)]) -> Result<Client, Error> {
        let api = plugin.api.clone();
        // The named values point into `options`, which outlive the call.
        let named: Vec<sys::PJRT_NamedValue> = options
            .iter()
            .map(|(name, value)| {
                let (type_, value, value_size) = match value {
                    Attribute::String(string) => (
                        sys::PJRT_NamedValue_kString,
                        sys::PJRT_NamedValue_Value {
                            string_value: string.as_ptr().cast(),
                        },
                        string.len(),
                    ),
                    Attribute::Int64(i) => (
                        sys::PJRT_NamedValue_kInt64,
                        sys::PJRT_NamedValue_Value { int64_value: *i },
                        1,
                    ),
                    Attribute::Int64List(l) => (
                        sys::PJRT_NamedValue_kInt64List,
                        sys::PJRT_NamedValue_Value {
                            int64_array_value: l.as_ptr(),
                        },
                        l.len(),
                    ),
                    Attribute::Float(f) => (
                        sys::PJRT_NamedValue_kFloat,
                        sys::PJRT_NamedValue_Value { float_value: *f },
                        1,
                    ),
                    Attribute::Bool(b) => (
                        sys::PJRT_NamedValue_kBool,
                        sys::PJRT_NamedValue_Value { bool_value: *b },
                        1,
                    ),
                };
                sys::PJRT_NamedValue {
                    struct_size: std::mem::size_of::<sys::PJRT_NamedValue>(),
                    extension_start: std::ptr::null_mut(),
                    name: name.as_ptr().cast(),
                    name_size: name.len(),
                    type_,
                    value,
                    value_size,
                }
            })
            .collect();
        let mut args = sys::PJRT_Client_Create_Args::new();
        args.create_options = named.as_ptr();
        args.num_options = named.len();
        call!(&api, PJRT_Client_Create, &mut args)?;
        if args.client.is_null() {
            return Err(unexpected(&api, "PJRT_Client_Create", "no client returned"));
        }
        Ok(Client {
            inner: Arc::new(ClientInner {
                api,
                ptr: args.client,
            }),
        })
    }

    fn api(&self) -> &Api {
        &self.inner.api
    }

    /// The platform's name, e.g. `cpu`.
    pub fn platform_name(&self) -> Result<String, Error> {
        let mut args = sys::PJRT_Client_PlatformName_Args::new();
        args.client = self.inner.ptr;
        call!(self.api(), PJRT_Client_PlatformName, &mut args)?;
        // SAFETY: the name lives as long as the client.
        Ok(unsafe { text(args.platform_name, args.platform_name_size) })
    }

    /// The platform's version, e.g. the CUDA version on GPU.
    pub fn platform_version(&self) -> Result<String, Error> {
        let mut args = sys::PJRT_Client_PlatformVersion_Args::new();
        args.client = self.inner.ptr;
        call!(self.api(), PJRT_Client_PlatformVersion, &mut args)?;
        // SAFETY: the version lives as long as the client.
        Ok(unsafe { text(args.platform_version, args.platform_version_size) })
    }

    /// Every device the client sees.
    pub fn devices(&self) -> Result<Vec<Device>, Error> {
        let mut args = sys::PJRT_Client_Devices_Args::new();
        args.client = self.inner.ptr;
        call!(self.api(), PJRT_Client_Devices, &mut args)?;
        // SAFETY: the list lives as long as the client.
        let list = unsafe { pointers(args.devices, args.num_devices) };
        list.iter().map(|&d| self.device(d)).collect()
    }

    /// The devices the client can run on.
    pub fn addressable_devices(&self) -> Result<Vec<Device>, Error> {
        let mut args = sys::PJRT_Client_AddressableDevices_Args::new();
        args.client = self.inner.ptr;
        call!(self.api(), PJRT_Client_AddressableDevices, &mut args)?;
        // SAFETY: the list lives as long as the client.
        let list = unsafe { pointers(args.addressable_devices, args.num_addressable_devices) };
        list.iter().map(|&d| self.device(d)).collect()
    }

    fn device(&self, device: *mut PJRT_Device) -> Result<Device, Error> {
        let api = self.api();
        let mut get = sys::PJRT_Device_GetDescription_Args::new();
        get.device = device;
        call!(api, PJRT_Device_GetDescription, &mut get)?;
        let mut id = sys::PJRT_DeviceDescription_Id_Args::new();
        id.device_description = get.device_description;
        call!(api, PJRT_DeviceDescription_Id, &mut id)?;
        let mut kind = sys::PJRT_DeviceDescription_Kind_Args::new();
        kind.device_description = get.device_description;
        call!(api, PJRT_DeviceDescription_Kind, &mut kind)?;
        let mut string = sys::PJRT_DeviceDescription_ToString_Args::new();
        string.device_description = get.device_description;
        call!(api, PJRT_DeviceDescription_ToString, &mut string)?;
        // SAFETY: the strings live as long as the device, which the client owns.
        Ok(unsafe {
            Device {
                id: id.id,
                kind: text(kind.device_kind, kind.device_kind_size),
                description: text(string.to_string, string.to_string_size),
            }
        })
    }

    /// Compiles a program for one device (one replica, one partition).
    pub fn compile(&self, program: &[u8], format: Format) -> Result<Executable, Error> {
        self.compile_with(program, format, &CompileOptions::default())
    }

    /// Compiles a program with `options`: for its devices (its replicas and partitions,
    /// SPMD partitioned when there are several partitions, which the plugin assigns), with
    /// XLA's option overrides. An error before compiling when the client has fewer devices.
    /// An override the plugin does not know is its error (XLA's: "No such compile option").
    pub fn compile_with(
        &self,
        program: &[u8],
        format: Format,
        options: &CompileOptions,
    ) -> Result<Executable, Error> {
        let partitioning = options.partitioning;
        let api = self.api();
        if partitioning.devices() > 1 {
            let have = self.addressable_devices()?.len();
            if have < partitioning.devices() {
                return Err(Error::BadInput {
                    path: api.path.clone(),
                    call: "PJRT_Client_Compile",
                    message: format!(
                        "the program runs on {partitioning}, the client has {have} device{}",
                        if have == 1 { "" } else { "s" }
                    ),
                });
            }
        }
        let options = proto::compile_options(options);
        let format_name = format.as_str();
        let mut code = sys::PJRT_Program::new();
        // The plugin only reads the code when compiling.
        code.code = program.as_ptr().cast::<c_char>().cast_mut();
        code.code_size = program.len();
        code.format = format_name.as_ptr().cast();
        code.format_size = format_name.len();
        let mut args = sys::PJRT_Client_Compile_Args::new();
        args.client = self.inner.ptr;
        args.program = &code;
        args.compile_options = options.as_ptr().cast();
        args.compile_options_size = options.len();
        call!(api, PJRT_Client_Compile, &mut args)?;
        if args.executable.is_null() {
            return Err(unexpected(
                api,
                "PJRT_Client_Compile",
                "no executable returned",
            ));
        }
        let mut executable = Executable {
            client: self.inner.clone(),
            ptr: args.executable,
            devices: Vec::new(),
            partitioning,
            num_outputs: 0,
            outputs: None,
            inputs: OnceLock::new(),
            shardings: OnceLock::new(),
        };
        let (num_outputs, outputs) = {
            let info = executable.info()?;
            let n = info.num_outputs()?;
            (n, info.outputs(n))
        };
        executable.num_outputs = num_outputs;
        executable.outputs = outputs;
        executable.devices = executable.addressable_devices()?;
        if executable.devices.len() != partitioning.devices() {
            return Err(unexpected(
                api,
                "PJRT_LoadedExecutable_AddressableDevices",
                format!(
                    "the executable for {partitioning} was loaded on {} devices",
                    executable.devices.len()
                ),
            ));
        }
        Ok(executable)
    }
}

/// A compiled program, loaded on the client's device (`PJRT_LoadedExecutable`).
pub struct Executable {
    client: Arc<ClientInner>,
    ptr: *mut sys::PJRT_LoadedExecutable,
    /// The devices it runs on, owned by the client, in the order arguments are given.
    devices: Vec<*mut PJRT_Device>,
    partitioning: Partitioning,
    num_outputs: usize,
    outputs: Option<Vec<TensorSpec>>,
    inputs: OnceLock<Option<Vec<TensorSpec>>>,
    /// The parameters' and outputs' shardings of an SPMD program.
    shardings: OnceLock<Option<(Vec<Sharding>, Vec<Sharding>)>>,
}

// SAFETY: PJRT executables are thread-safe; the rest is plain data.
unsafe impl Send for Executable {}
// SAFETY: as above.
unsafe impl Sync for Executable {}

impl Drop for Executable {
    fn drop(&mut self) {
        let mut args = sys::PJRT_LoadedExecutable_Destroy_Args::new();
        args.executable = self.ptr;
        let _ = call!(&self.client.api, PJRT_LoadedExecutable_Destroy, &mut args);
    }
}

impl Executable {
    /// How many outputs a run returns (a tuple result counts its elements).
    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    /// The outputs' element types and dimensions, where the plugin tells them
    /// (`PJRT_Executable_OutputElementTypes`, `PJRT_Executable_OutputDimensions`).
    pub fn outputs(&self) -> Option<&[TensorSpec]> {
        self.outputs.as_deref()
    }

    /// The inputs' element types and dimensions, where the plugin tells them: read from the
    /// optimized program (`PJRT_Executable_OptimizedProgram`, an HLO module) on first use.
    pub fn inputs(&self) -> Option<&[TensorSpec]> {
        self.inputs
            .get_or_init(|| {
                let info = self.info().ok()?;
                proto::entry_parameters(&info.optimized_hlo()?)
            })
            .as_deref()
    }

    /// The replicas and partitions it was compiled for.
    pub fn partitioning(&self) -> Partitioning {
        self.partitioning
    }

    /// The shardings XLA's SPMD partitioner gave the parameters and the outputs (a tuple's
    /// elements), read from the optimized program; `None` for a program that was not
    /// partitioned, or a plugin that does not say.
    pub fn shardings(&self) -> Option<&(Vec<Sharding>, Vec<Sharding>)> {
        self.shardings
            .get_or_init(|| {
                let info = self.info().ok()?;
                proto::spmd_shardings(&info.optimized_hlo()?)
            })
            .as_ref()
    }

    /// Runs the program on `inputs` and returns its outputs, dense and in C order. Inputs
    /// that do not fit what the executable expects are an error before the plugin is called.
    /// For one device; [`Executable::execute_global`] runs on several.
    pub fn execute(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, Error> {
        if self.devices.len() != 1 {
            return Err(Error::BadInput {
                path: self.client.api.path.clone(),
                call: "PJRT_LoadedExecutable_Execute",
                message: format!(
                    "the executable runs on {}: give its inputs as whole arrays (execute_global)",
                    self.partitioning
                ),
            });
        }
        let mut outputs = self.execute_on(&[inputs.to_vec()])?;
        Ok(outputs.pop().unwrap_or_default())
    }

    /// Runs the program on every device it was compiled for, from whole arrays: each
    /// parameter split into the piece each device takes (by the parameters' SPMD
    /// shardings; every replica, and a program not partitioned, takes all of it), and each
    /// output assembled from the pieces the devices return, to the dimensions
    /// `output_dims` gives. Where several devices return the same piece, their copies are
    /// compared: [`GlobalRun::disagreements`] names the devices whose copies differ.
    pub fn execute_global(
        &self,
        inputs: &[HostTensor],
        output_dims: &[Vec<usize>],
    ) -> Result<GlobalRun, Error> {
        let api = &*self.client.api;
        let n = self.devices.len();
        let bad = |message: String| Error::BadInput {
            path: api.path.clone(),
            call: "PJRT_LoadedExecutable_Execute",
            message,
        };
        let (parameters, outputs) = match self.shardings() {
            Some((p, o)) => (p.clone(), o.clone()),
            None if self.partitioning.spmd() => {
                return Err(unexpected(
                    api,
                    "PJRT_Executable_OptimizedProgram",
                    "the partitioned program records no shardings of its parameters and outputs (spmd_parameters_shardings, spmd_output_sharding)",
                ))
            }
            None => (
                vec![Sharding::Replicated; inputs.len()],
                vec![Sharding::Replicated; self.num_outputs],
            ),
        };
        if parameters.len() != inputs.len() {
            return Err(bad(format!(
                "the executable takes {} inputs, {} given",
                parameters.len(),
                inputs.len()
            )));
        }
        if outputs.len() != self.num_outputs || output_dims.len() != self.num_outputs {
            return Err(bad(format!(
                "the executable returns {} outputs; {} shardings were recorded and {} dimensions given",
                self.num_outputs,
                outputs.len(),
                output_dims.len()
            )));
        }
        check_bytes(inputs).map_err(bad)?;
        let per_device: Vec<Vec<HostTensor>> = (0..n)
            .map(|d| {
                inputs
                    .iter()
                    .zip(&parameters)
                    .map(|(t, s)| sharding::split(t, s, self.logical(d)))
                    .collect()
            })
            .collect();
        let returned = self.execute_on(&per_device)?;
        let mut run = GlobalRun::default();
        for (k, (sharding, dims)) in outputs.iter().zip(output_dims).enumerate() {
            let shards: Vec<(usize, HostTensor)> = (0..n)
                .map(|d| (self.logical(d), returned[d][k].clone()))
                .collect();
            let (tensor, disagreement) =
                sharding::assemble(&shards, sharding, dims).map_err(|e| {
                    unexpected(
                        api,
                        "PJRT_LoadedExecutable_Execute",
                        format!("output {k}: {e}"),
                    )
                })?;
            run.outputs.push(tensor);
            if let Some(d) = disagreement {
                run.disagreements.push((k, d));
            }
        }
        Ok(run)
    }

    /// The partition (SPMD's device number in shardings) of the `d`-th device arguments
    /// go to: devices are replica-major, so a replica's partitions are consecutive.
    fn logical(&self, d: usize) -> usize {
        d % self.partitioning.num_partitions
    }

    /// Runs the program with `inputs[d]` on the `d`-th device; each device's outputs.
    fn execute_on(&self, inputs: &[Vec<HostTensor>]) -> Result<Vec<Vec<HostTensor>>, Error> {
        for device_inputs in inputs {
            self.check_inputs(device_inputs)?;
        }
        let api = &*self.client.api;
        let n = self.devices.len();
        let mut buffers = Vec::with_capacity(n);
        for (device_inputs, &device) in inputs.iter().zip(&self.devices) {
            let mut list = Vec::with_capacity(device_inputs.len());
            for tensor in device_inputs {
                list.push(self.upload(tensor, device)?);
            }
            buffers.push(list);
        }
        let arguments: Vec<Vec<*mut PJRT_Buffer>> = buffers
            .iter()
            .map(|list| list.iter().map(|b| b.ptr).collect())
            .collect();
        let argument_lists: Vec<*const *mut PJRT_Buffer> =
            arguments.iter().map(|a| a.as_ptr()).collect();
        let mut outputs: Vec<Vec<*mut PJRT_Buffer>> = vec![vec![null_mut(); self.num_outputs]; n];
        let output_lists: Vec<*mut *mut PJRT_Buffer> =
            outputs.iter_mut().map(|o| o.as_mut_ptr()).collect();
        let mut done = vec![null_mut(); n];
        let mut options = sys::PJRT_ExecuteOptions::new();
        let mut args = sys::PJRT_LoadedExecutable_Execute_Args::new();
        args.executable = self.ptr;
        args.options = &mut options;
        args.argument_lists = argument_lists.as_ptr();
        args.num_devices = n;
        args.num_args = inputs.first().map_or(0, Vec::len);
        args.output_lists = output_lists.as_ptr();
        args.device_complete_events = done.as_mut_ptr();
        let ran = call!(api, PJRT_LoadedExecutable_Execute, &mut args);
        // Own whatever came back before looking at errors, so it is freed either way.
        let outputs: Vec<Vec<Buffer>> = outputs
            .into_iter()
            .map(|list| {
                list.into_iter()
                    .filter(|p| !p.is_null())
                    .map(|ptr| Buffer { api, ptr })
                    .collect()
            })
            .collect();
        if let Err(e) = ran {
            for event in done {
                api.destroy_event(event);
            }
            return Err(e);
        }
        let mut waited = Ok(());
        for event in done {
            let r = api.await_event("PJRT_LoadedExecutable_Execute", event);
            if waited.is_ok() {
                waited = r;
            }
        }
        waited?;
        drop(buffers);
        let mut all = Vec::with_capacity(n);
        for (d, list) in outputs.iter().enumerate() {
            if list.len() != self.num_outputs {
                return Err(unexpected(
                    api,
                    "PJRT_LoadedExecutable_Execute",
                    format!(
                        "{} outputs expected, {} returned by device {d}",
                        self.num_outputs,
                        list.len()
                    ),
                ));
            }
            all.push(
                list.iter()
                    .enumerate()
                    .map(|(i, b)| b.download(i))
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
        Ok(all)
    }

    fn check_inputs(&self, inputs: &[HostTensor]) -> Result<(), Error> {
        let bad = |message: String| Error::BadInput {
            path: self.client.api.path.clone(),
            call: "PJRT_LoadedExecutable_Execute",
            message,
        };
        check_bytes(inputs).map_err(bad)?;
        let Some(expected) = self.inputs() else {
            return Ok(());
        };
        let list = |specs: Vec<String>| format!("({})", specs.join(", "));
        if expected.len() != inputs.len() {
            return Err(bad(format!(
                "the executable takes {} inputs {}, {} given {}",
                expected.len(),
                list(expected.iter().map(ToString::to_string).collect()),
                inputs.len(),
                list(
                    inputs
                        .iter()
                        .map(|t| TensorSpec::of(t).to_string())
                        .collect()
                ),
            )));
        }
        for (i, (want, t)) in expected.iter().zip(inputs).enumerate() {
            let got = TensorSpec::of(t);
            if *want != got {
                return Err(bad(format!(
                    "input {i}: the executable expects {want}, got {got}"
                )));
            }
        }
        Ok(())
    }

    /// Copies a host tensor to one of the executable's devices.
    fn upload(&self, tensor: &HostTensor, device: *mut PJRT_Device) -> Result<Buffer<'_>, Error> {
        let api = &*self.client.api;
        let dims: Vec<i64> = tensor.shape.iter().map(|&d| d as i64).collect();
        let mut args = sys::PJRT_Client_BufferFromHostBuffer_Args::new();
        args.client = self.client.ptr;
        args.data = tensor.data.as_ptr().cast();
        args.type_ = ElementType::from(tensor.dtype).0;
        args.dims = dims.as_ptr();
        args.num_dims = dims.len();
        args.host_buffer_semantics = sys::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
        args.device = device;
        call!(api, PJRT_Client_BufferFromHostBuffer, &mut args)?;
        let buffer = Buffer {
            api,
            ptr: args.buffer,
        };
        api.await_event(
            "PJRT_Client_BufferFromHostBuffer",
            args.done_with_host_buffer,
        )?;
        if buffer.ptr.is_null() {
            return Err(unexpected(
                api,
                "PJRT_Client_BufferFromHostBuffer",
                "no buffer returned",
            ));
        }
        Ok(buffer)
    }

    /// The unloaded view of the executable, for its metadata.
    fn info(&self) -> Result<Info<'_>, Error> {
        let api = &*self.client.api;
        let mut args = sys::PJRT_LoadedExecutable_GetExecutable_Args::new();
        args.loaded_executable = self.ptr;
        call!(api, PJRT_LoadedExecutable_GetExecutable, &mut args)?;
        if args.executable.is_null() {
            return Err(unexpected(
                api,
                "PJRT_LoadedExecutable_GetExecutable",
                "no executable returned",
            ));
        }
        Ok(Info {
            api,
            ptr: args.executable,
        })
    }

    /// The devices the executable was loaded on, in the order it takes arguments.
    fn addressable_devices(&self) -> Result<Vec<*mut PJRT_Device>, Error> {
        let api = &*self.client.api;
        let mut args = sys::PJRT_LoadedExecutable_AddressableDevices_Args::new();
        args.executable = self.ptr;
        call!(api, PJRT_LoadedExecutable_AddressableDevices, &mut args)?;
        // SAFETY: the list lives as long as the executable.
        let devices = unsafe { pointers(args.addressable_devices, args.num_addressable_devices) };
        if devices.is_empty() {
            return Err(unexpected(
                api,
                "PJRT_LoadedExecutable_AddressableDevices",
                "the executable has no device",
            ));
        }
        Ok(devices.to_vec())
    }
}

/// An error naming the first of `inputs` whose bytes are not its shape's.
fn check_bytes(inputs: &[HostTensor]) -> Result<(), String> {
    for (i, t) in inputs.iter().enumerate() {
        let size = t
            .shape
            .iter()
            .try_fold(t.dtype.itemsize(), |n, &d| n.checked_mul(d));
        if size != Some(t.data.len()) {
            return Err(format!(
                "input {i} is {} but holds {} bytes",
                TensorSpec::of(t),
                t.data.len()
            ));
        }
    }
    Ok(())
}

/// What a run over several devices returned: the outputs as whole arrays, and where
/// devices that hold the same piece of an output returned different values.
#[derive(Debug, Default)]
pub struct GlobalRun {
    /// The outputs, assembled.
    pub outputs: Vec<HostTensor>,
    /// Each output whose copies differ between devices, with the first two devices that
    /// disagree (by the order of the executable's devices).
    pub disagreements: Vec<(usize, Disagreement)>,
}

/// A `PJRT_Executable`, destroyed on drop.
struct Info<'a> {
    api: &'a Api,
    ptr: *mut sys::PJRT_Executable,
}

impl Drop for Info<'_> {
    fn drop(&mut self) {
        let mut args = sys::PJRT_Executable_Destroy_Args::new();
        args.executable = self.ptr;
        let _ = call!(self.api, PJRT_Executable_Destroy, &mut args);
    }
}

impl Info<'_> {
    fn num_outputs(&self) -> Result<usize, Error> {
        let mut args = sys::PJRT_Executable_NumOutputs_Args::new();
        args.executable = self.ptr;
        call!(self.api, PJRT_Executable_NumOutputs, &mut args)?;
        Ok(args.num_outputs)
    }

    /// The outputs' types and dimensions; `None` where the plugin cannot tell.
    fn outputs(&self, num_outputs: usize) -> Option<Vec<TensorSpec>> {
        let mut types = sys::PJRT_Executable_OutputElementTypes_Args::new();
        types.executable = self.ptr;
        call!(self.api, PJRT_Executable_OutputElementTypes, &mut types).ok()?;
        let mut dims = sys::PJRT_Executable_OutputDimensions_Args::new();
        dims.executable = self.ptr;
        call!(self.api, PJRT_Executable_OutputDimensions, &mut dims).ok()?;
        if types.num_output_types != num_outputs || dims.num_outputs != num_outputs {
            return None;
        }
        // SAFETY: the arrays live as long as the executable and have the given lengths.
        let (types, sizes) = unsafe {
            (
                slice(types.output_types, num_outputs),
                slice(dims.dim_sizes, num_outputs),
            )
        };
        // SAFETY: as above; `dims` holds the sum of `sizes`.
        let all_dims = unsafe { slice(dims.dims, sizes.iter().sum()) };
        let mut at = 0;
        let specs = types
            .iter()
            .zip(sizes)
            .map(|(&t, &n)| {
                at += n;
                TensorSpec {
                    element_type: ElementType(t),
                    dims: all_dims[at - n..at].to_vec(),
                }
            })
            .collect();
        Some(specs)
    }

    /// The optimized program as a serialized `HloModuleProto`; `None` when the plugin does
    /// not give one. (XLA's plugins give an `HloModuleProtoWithConfig`, `hlo_with_config`.)
    fn optimized_hlo(&self) -> Option<Vec<u8>> {
        let mut program = sys::PJRT_Program::new();
        let mut args = sys::PJRT_Executable_OptimizedProgram_Args::new();
        args.executable = self.ptr;
        args.program = &mut program;
        // With no code buffer, the plugin only says how large the program is.
        call!(self.api, PJRT_Executable_OptimizedProgram, &mut args).ok()?;
        // SAFETY: the format is a static string of the plugin.
        let format = unsafe { text(program.format, program.format_size) };
        if format != "hlo" && format != "hlo_with_config" {
            return None;
        }
        let mut code = vec![0u8; program.code_size];
        program.code = code.as_mut_ptr().cast();
        args.program = &mut program;
        call!(self.api, PJRT_Executable_OptimizedProgram, &mut args).ok()?;
        code.truncate(program.code_size);
        if format == "hlo_with_config" {
            return proto::module_of_module_with_config(&code);
        }
        Some(code)
    }
}

/// A `PJRT_Buffer`, destroyed on drop.
struct Buffer<'a> {
    api: &'a Api,
    ptr: *mut PJRT_Buffer,
}

impl Drop for Buffer<'_> {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            let mut args = sys::PJRT_Buffer_Destroy_Args::new();
            args.buffer = self.ptr;
            let _ = call!(self.api, PJRT_Buffer_Destroy, &mut args);
        }
    }
}

impl Buffer<'_> {
    /// Copies output `index` to the host, dense and in C order.
    fn download(&self, index: usize) -> Result<HostTensor, Error> {
        let api = self.api;
        let mut ty = sys::PJRT_Buffer_ElementType_Args::new();
        ty.buffer = self.ptr;
        call!(api, PJRT_Buffer_ElementType, &mut ty)?;
        let element_type = ElementType(ty.type_);
        let dtype = element_type.dtype().ok_or_else(|| Error::UnsupportedType {
            path: api.path.clone(),
            call: "PJRT_Buffer_ElementType",
            what: format!("output {index}"),
            element_type,
        })?;
        let mut dims = sys::PJRT_Buffer_Dimensions_Args::new();
        dims.buffer = self.ptr;
        call!(api, PJRT_Buffer_Dimensions, &mut dims)?;
        // SAFETY: the dimensions live as long as the buffer.
        let dims = unsafe { slice(dims.dims, dims.num_dims) }.to_vec();
        let spec = TensorSpec {
            element_type,
            dims: dims.clone(),
        };
        let shape: Option<Vec<usize>> = dims.iter().map(|&d| usize::try_from(d).ok()).collect();
        let size = shape.as_ref().and_then(|s| {
            s.iter()
                .try_fold(dtype.itemsize(), |n, &d| n.checked_mul(d))
        });
        let (Some(shape), Some(size)) = (shape, size) else {
            return Err(unexpected(
                api,
                "PJRT_Buffer_Dimensions",
                format!("output {index} has dimensions {spec}"),
            ));
        };
        if size == 0 {
            return Ok(host_tensor(dtype, shape, Vec::new()));
        }
        // Ask for the dense row-major layout: minor-to-major is the dimensions, last first.
        let minor_to_major: Vec<i64> = (0..dims.len() as i64).rev().collect();
        let mut layout = sys::PJRT_Buffer_MemoryLayout {
            struct_size: sys::PJRT_Buffer_MemoryLayout_STRUCT_SIZE,
            extension_start: null_mut(),
            tiled: sys::PJRT_Buffer_MemoryLayout_Tiled {
                struct_size: sys::PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE,
                extension_start: null_mut(),
                minor_to_major: minor_to_major.as_ptr(),
                minor_to_major_size: minor_to_major.len(),
                tile_dims: std::ptr::null(),
                tile_dim_sizes: std::ptr::null(),
                num_tiles: 0,
            },
            type_: sys::PJRT_Buffer_MemoryLayout_Type_Tiled,
        };
        let mut args = sys::PJRT_Buffer_ToHostBuffer_Args::new();
        args.src = self.ptr;
        args.host_layout = &mut layout;
        // With no destination, the plugin says how many bytes it will write.
        call!(api, PJRT_Buffer_ToHostBuffer, &mut args)?;
        if args.dst_size != size {
            return Err(unexpected(
                api,
                "PJRT_Buffer_ToHostBuffer",
                format!(
                    "output {index} ({spec}) needs {size} bytes, the plugin wants to write {}",
                    args.dst_size
                ),
            ));
        }
        let mut data = vec![0u8; size];
        args.dst = data.as_mut_ptr().cast();
        args.dst_size = size;
        args.event = null_mut();
        call!(api, PJRT_Buffer_ToHostBuffer, &mut args)?;
        api.await_event("PJRT_Buffer_ToHostBuffer", args.event)?;
        Ok(host_tensor(dtype, shape, data))
    }
}

fn host_tensor(dtype: graphbug_ir::Dtype, shape: Vec<usize>, data: Vec<u8>) -> HostTensor {
    HostTensor {
        dtype,
        shape,
        data,
        strides: None,
    }
}

fn unexpected(api: &Api, call: &'static str, message: impl Into<String>) -> Error {
    Error::Unexpected {
        path: api.path.clone(),
        call,
        message: message.into(),
    }
}

/// A plugin-owned array as a slice (empty for null).
///
/// # Safety
/// `ptr` is null or points at `len` live values that outlive the slice's use.
unsafe fn slice<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

/// A plugin-owned list of pointers.
///
/// # Safety
/// As for [`slice`].
unsafe fn pointers<'a, T>(ptr: *const *mut T, len: usize) -> &'a [*mut T] {
    // SAFETY: the caller's promise.
    unsafe { slice(ptr, len) }
}
