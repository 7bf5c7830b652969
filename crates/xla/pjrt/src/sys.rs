//! The parts of the PJRT C API (`xla/pjrt/c/pjrt_c_api.h`) this crate calls, as `#[repr(C)]`
//! Rust.
//!
//! They follow the header of **PJRT C API 0.81**, the one the `xla-cpu-pjrt` 0.0.1 wheel ships
//! (`xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h`). Written by hand from it, except the list
//! of [`PJRT_Api`] fields, which was generated from the header's `_PJRT_API_STRUCT_FIELD(...)`
//! lines (`grep -o '_PJRT_API_STRUCT_FIELD(PJRT_[A-Za-z0-9_]*)'`); the fields this crate calls
//! were then typed by hand, the others are [`Unused`] (a pointer of the same size). Only
//! argument structs of the calls made here are written out, each with every field of the 0.81
//! header, and each struct's `STRUCT_SIZE` is the header's `PJRT_STRUCT_SIZE(type, last_field)`:
//! the end of its last field, without trailing padding. The unit tests check the table's size
//! (984 bytes, what the 0.81 plugin reports) and a few argument sizes against the header.
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code
)]

use std::ffi::{c_char, c_int, c_void};

/// Major version of the header these bindings follow.
pub const PJRT_API_MAJOR: i32 = 0;
/// Minor version of the header these bindings follow.
pub const PJRT_API_MINOR: i32 = 81;

/// Opaque PJRT objects, only ever behind pointers.
macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}
opaque!(
    PJRT_Error,
    PJRT_Event,
    PJRT_Client,
    PJRT_Device,
    PJRT_DeviceDescription,
    PJRT_Memory,
    PJRT_Executable,
    PJRT_LoadedExecutable,
    PJRT_Buffer,
);

/// An argument struct: `struct_size` and `extension_start`, then the listed fields. `new()`
/// zeroes every field and sets `struct_size` to `STRUCT_SIZE`.
macro_rules! args {
    ($($name:ident { $($field:ident : $ty:ty),* $(,)? })*) => {$(
        #[repr(C)]
        pub struct $name {
            pub struct_size: usize,
            pub extension_start: *mut c_void,
            $(pub $field: $ty,)*
        }
        impl $name {
            /// `PJRT_STRUCT_SIZE(type, last_field)`: where the last field ends.
            pub const STRUCT_SIZE: usize = {
                #[allow(unused_mut)]
                let mut end = ::std::mem::offset_of!($name, extension_start)
                    + ::std::mem::size_of::<*mut c_void>();
                $(
                    let e = ::std::mem::offset_of!($name, $field) + ::std::mem::size_of::<$ty>();
                    if e > end {
                        end = e;
                    }
                )*
                end
            };
            /// All fields zero (null pointers, no options), `struct_size` set.
            pub fn new() -> Self {
                // SAFETY: every field is an integer, a raw pointer or an `Option` of a
                // function pointer, for which all-zero bytes are a valid value.
                let mut args: Self = unsafe { ::std::mem::zeroed() };
                args.struct_size = Self::STRUCT_SIZE;
                args
            }
        }
    )*};
}

/// `PJRT_Error_Code` (absl status codes).
pub type PJRT_Error_Code = c_int;
/// `PJRT_Buffer_Type`, as a plain integer: a newer plugin may return values this header lacks.
pub type PJRT_Buffer_Type = c_int;
/// `PJRT_NamedValue_Type`.
pub type PJRT_NamedValue_Type = c_int;
pub const PJRT_NamedValue_kString: c_int = 0;
pub const PJRT_NamedValue_kInt64: c_int = 1;
pub const PJRT_NamedValue_kInt64List: c_int = 2;
pub const PJRT_NamedValue_kFloat: c_int = 3;
pub const PJRT_NamedValue_kBool: c_int = 4;
/// `PJRT_HostBufferSemantics_kImmutableOnlyDuringCall`: the plugin copies the data during the
/// call and keeps no reference to it.
pub const PJRT_HostBufferSemantics_kImmutableOnlyDuringCall: c_int = 0;
/// `PJRT_Buffer_MemoryLayout_Type_Tiled`.
pub const PJRT_Buffer_MemoryLayout_Type_Tiled: c_int = 0;

/// A call in the table: takes its argument struct, returns an error or null.
pub type Call<A> = Option<unsafe extern "C" fn(*mut A) -> *mut PJRT_Error>;
/// A table entry this crate does not call (kept for the offsets of the later ones).
pub type Unused = Option<unsafe extern "C" fn()>;

#[repr(C)]
pub struct PJRT_Api_Version {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub major_version: c_int,
    pub minor_version: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union PJRT_NamedValue_Value {
    pub string_value: *const c_char,
    pub int64_value: i64,
    pub int64_array_value: *const i64,
    pub float_value: f32,
    pub bool_value: bool,
}

#[repr(C)]
pub struct PJRT_NamedValue {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub name: *const c_char,
    pub name_size: usize,
    pub type_: PJRT_NamedValue_Type,
    pub value: PJRT_NamedValue_Value,
    pub value_size: usize,
}

/// `PJRT_Buffer_MemoryLayout_Tiled`.
#[repr(C)]
pub struct PJRT_Buffer_MemoryLayout_Tiled {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub minor_to_major: *const i64,
    pub minor_to_major_size: usize,
    pub tile_dims: *const i64,
    pub tile_dim_sizes: *const usize,
    pub num_tiles: usize,
}

/// `PJRT_Buffer_MemoryLayout`. In C the layout is a union of the tiled and the strided form;
/// the tiled one is the larger (56 bytes against 32), so the union has its size and alignment.
#[repr(C)]
pub struct PJRT_Buffer_MemoryLayout {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub tiled: PJRT_Buffer_MemoryLayout_Tiled,
    pub type_: c_int,
}
pub const PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE: usize = 56;
pub const PJRT_Buffer_MemoryLayout_STRUCT_SIZE: usize = 76;

args! {
    PJRT_Error_Destroy_Args { error: *mut PJRT_Error }
    PJRT_Error_Message_Args { error: *const PJRT_Error, message: *const c_char, message_size: usize }
    PJRT_Error_GetCode_Args { error: *const PJRT_Error, code: PJRT_Error_Code }

    PJRT_Plugin_Initialize_Args {}
    PJRT_Plugin_Attributes_Args { attributes: *const PJRT_NamedValue, num_attributes: usize }

    PJRT_Event_Destroy_Args { event: *mut PJRT_Event }
    PJRT_Event_Await_Args { event: *mut PJRT_Event }

    PJRT_Client_Create_Args {
        create_options: *const PJRT_NamedValue,
        num_options: usize,
        kv_get_callback: Unused,
        kv_get_user_arg: *mut c_void,
        kv_put_callback: Unused,
        kv_put_user_arg: *mut c_void,
        client: *mut PJRT_Client,
        kv_try_get_callback: Unused,
        kv_try_get_user_arg: *mut c_void,
    }
    PJRT_Client_Destroy_Args { client: *mut PJRT_Client }
    PJRT_Client_PlatformName_Args {
        client: *mut PJRT_Client,
        platform_name: *const c_char,
        platform_name_size: usize,
    }
    PJRT_Client_PlatformVersion_Args {
        client: *mut PJRT_Client,
        platform_version: *const c_char,
        platform_version_size: usize,
    }
    PJRT_Client_Devices_Args {
        client: *mut PJRT_Client,
        devices: *const *mut PJRT_Device,
        num_devices: usize,
    }
    PJRT_Client_AddressableDevices_Args {
        client: *mut PJRT_Client,
        addressable_devices: *const *mut PJRT_Device,
        num_addressable_devices: usize,
    }
    PJRT_Program {
        code: *mut c_char,
        code_size: usize,
        format: *const c_char,
        format_size: usize,
    }
    PJRT_Client_Compile_Args {
        client: *mut PJRT_Client,
        program: *const PJRT_Program,
        compile_options: *const c_char,
        compile_options_size: usize,
        executable: *mut PJRT_LoadedExecutable,
    }
    PJRT_Client_BufferFromHostBuffer_Args {
        client: *mut PJRT_Client,
        data: *const c_void,
        type_: PJRT_Buffer_Type,
        dims: *const i64,
        num_dims: usize,
        byte_strides: *const i64,
        num_byte_strides: usize,
        host_buffer_semantics: c_int,
        device: *mut PJRT_Device,
        memory: *mut PJRT_Memory,
        device_layout: *mut PJRT_Buffer_MemoryLayout,
        done_with_host_buffer: *mut PJRT_Event,
        buffer: *mut PJRT_Buffer,
    }

    PJRT_DeviceDescription_Id_Args {
        device_description: *mut PJRT_DeviceDescription,
        id: c_int,
    }
    PJRT_DeviceDescription_Kind_Args {
        device_description: *mut PJRT_DeviceDescription,
        device_kind: *const c_char,
        device_kind_size: usize,
    }
    PJRT_DeviceDescription_ToString_Args {
        device_description: *mut PJRT_DeviceDescription,
        to_string: *const c_char,
        to_string_size: usize,
    }
    PJRT_Device_GetDescription_Args {
        device: *mut PJRT_Device,
        device_description: *mut PJRT_DeviceDescription,
    }

    PJRT_Executable_Destroy_Args { executable: *mut PJRT_Executable }
    PJRT_Executable_NumOutputs_Args { executable: *mut PJRT_Executable, num_outputs: usize }
    PJRT_Executable_OptimizedProgram_Args {
        executable: *mut PJRT_Executable,
        program: *mut PJRT_Program,
    }
    PJRT_Executable_OutputElementTypes_Args {
        executable: *mut PJRT_Executable,
        output_types: *mut PJRT_Buffer_Type,
        num_output_types: usize,
    }
    PJRT_Executable_OutputDimensions_Args {
        executable: *mut PJRT_Executable,
        num_outputs: usize,
        dims: *const i64,
        dim_sizes: *const usize,
    }

    PJRT_LoadedExecutable_Destroy_Args { executable: *mut PJRT_LoadedExecutable }
    PJRT_LoadedExecutable_GetExecutable_Args {
        loaded_executable: *mut PJRT_LoadedExecutable,
        executable: *mut PJRT_Executable,
    }
    PJRT_LoadedExecutable_AddressableDevices_Args {
        executable: *mut PJRT_LoadedExecutable,
        addressable_devices: *const *mut PJRT_Device,
        num_addressable_devices: usize,
    }
    PJRT_ExecuteOptions {
        send_callbacks: *mut c_void,
        recv_callbacks: *mut c_void,
        num_send_ops: usize,
        num_recv_ops: usize,
        launch_id: c_int,
        non_donatable_input_indices: *const i64,
        num_non_donatable_input_indices: usize,
        context: *mut c_void,
        call_location: *const c_char,
        num_tasks: usize,
        task_ids: *mut c_int,
        incarnation_ids: *mut i64,
    }
    PJRT_LoadedExecutable_Execute_Args {
        executable: *mut PJRT_LoadedExecutable,
        options: *mut PJRT_ExecuteOptions,
        argument_lists: *const *const *mut PJRT_Buffer,
        num_devices: usize,
        num_args: usize,
        output_lists: *const *mut *mut PJRT_Buffer,
        device_complete_events: *mut *mut PJRT_Event,
        execute_device: *mut PJRT_Device,
    }

    PJRT_Buffer_Destroy_Args { buffer: *mut PJRT_Buffer }
    PJRT_Buffer_ElementType_Args { buffer: *mut PJRT_Buffer, type_: PJRT_Buffer_Type }
    PJRT_Buffer_Dimensions_Args { buffer: *mut PJRT_Buffer, dims: *const i64, num_dims: usize }
    PJRT_Buffer_ToHostBuffer_Args {
        src: *mut PJRT_Buffer,
        host_layout: *mut PJRT_Buffer_MemoryLayout,
        dst: *mut c_void,
        dst_size: usize,
        event: *mut PJRT_Event,
    }
}

/// `PJRT_Api`, the function table `GetPjrtApi` returns. A plugin built against an older
/// header has a shorter table (its `struct_size`): read an entry only after checking that the
/// table covers its offset.
#[repr(C)]
pub struct PJRT_Api {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub pjrt_api_version: PJRT_Api_Version,
    pub PJRT_Error_Destroy: Option<unsafe extern "C" fn(*mut PJRT_Error_Destroy_Args)>,
    pub PJRT_Error_Message: Option<unsafe extern "C" fn(*mut PJRT_Error_Message_Args)>,
    pub PJRT_Error_GetCode: Call<PJRT_Error_GetCode_Args>,
    pub PJRT_Plugin_Initialize: Call<PJRT_Plugin_Initialize_Args>,
    pub PJRT_Plugin_Attributes: Call<PJRT_Plugin_Attributes_Args>,
    pub PJRT_Event_Destroy: Call<PJRT_Event_Destroy_Args>,
    pub PJRT_Event_IsReady: Unused,
    pub PJRT_Event_Error: Unused,
    pub PJRT_Event_Await: Call<PJRT_Event_Await_Args>,
    pub PJRT_Event_OnReady: Unused,
    pub PJRT_Client_Create: Call<PJRT_Client_Create_Args>,
    pub PJRT_Client_Destroy: Call<PJRT_Client_Destroy_Args>,
    pub PJRT_Client_PlatformName: Call<PJRT_Client_PlatformName_Args>,
    pub PJRT_Client_ProcessIndex: Unused,
    pub PJRT_Client_PlatformVersion: Call<PJRT_Client_PlatformVersion_Args>,
    pub PJRT_Client_Devices: Call<PJRT_Client_Devices_Args>,
    pub PJRT_Client_AddressableDevices: Call<PJRT_Client_AddressableDevices_Args>,
    pub PJRT_Client_LookupDevice: Unused,
    pub PJRT_Client_LookupAddressableDevice: Unused,
    pub PJRT_Client_AddressableMemories: Unused,
    pub PJRT_Client_Compile: Call<PJRT_Client_Compile_Args>,
    pub PJRT_Client_DefaultDeviceAssignment: Unused,
    pub PJRT_Client_BufferFromHostBuffer: Call<PJRT_Client_BufferFromHostBuffer_Args>,
    pub PJRT_DeviceDescription_Id: Call<PJRT_DeviceDescription_Id_Args>,
    pub PJRT_DeviceDescription_ProcessIndex: Unused,
    pub PJRT_DeviceDescription_Attributes: Unused,
    pub PJRT_DeviceDescription_Kind: Call<PJRT_DeviceDescription_Kind_Args>,
    pub PJRT_DeviceDescription_DebugString: Unused,
    pub PJRT_DeviceDescription_ToString: Call<PJRT_DeviceDescription_ToString_Args>,
    pub PJRT_Device_GetDescription: Call<PJRT_Device_GetDescription_Args>,
    pub PJRT_Device_IsAddressable: Unused,
    pub PJRT_Device_LocalHardwareId: Unused,
    pub PJRT_Device_AddressableMemories: Unused,
    pub PJRT_Device_DefaultMemory: Unused,
    pub PJRT_Device_MemoryStats: Unused,
    pub PJRT_Memory_Id: Unused,
    pub PJRT_Memory_Kind: Unused,
    pub PJRT_Memory_DebugString: Unused,
    pub PJRT_Memory_ToString: Unused,
    pub PJRT_Memory_AddressableByDevices: Unused,
    pub PJRT_Executable_Destroy: Call<PJRT_Executable_Destroy_Args>,
    pub PJRT_Executable_Name: Unused,
    pub PJRT_Executable_NumReplicas: Unused,
    pub PJRT_Executable_NumPartitions: Unused,
    pub PJRT_Executable_NumOutputs: Call<PJRT_Executable_NumOutputs_Args>,
    pub PJRT_Executable_SizeOfGeneratedCodeInBytes: Unused,
    pub PJRT_Executable_GetCostAnalysis: Unused,
    pub PJRT_Executable_OutputMemoryKinds: Unused,
    pub PJRT_Executable_OptimizedProgram: Call<PJRT_Executable_OptimizedProgram_Args>,
    pub PJRT_Executable_Serialize: Unused,
    pub PJRT_LoadedExecutable_Destroy: Call<PJRT_LoadedExecutable_Destroy_Args>,
    pub PJRT_LoadedExecutable_GetExecutable: Call<PJRT_LoadedExecutable_GetExecutable_Args>,
    pub PJRT_LoadedExecutable_AddressableDevices:
        Call<PJRT_LoadedExecutable_AddressableDevices_Args>,
    pub PJRT_LoadedExecutable_Delete: Unused,
    pub PJRT_LoadedExecutable_IsDeleted: Unused,
    pub PJRT_LoadedExecutable_Execute: Call<PJRT_LoadedExecutable_Execute_Args>,
    pub PJRT_Executable_DeserializeAndLoad: Unused,
    pub PJRT_LoadedExecutable_Fingerprint: Unused,
    pub PJRT_Buffer_Destroy: Call<PJRT_Buffer_Destroy_Args>,
    pub PJRT_Buffer_ElementType: Call<PJRT_Buffer_ElementType_Args>,
    pub PJRT_Buffer_Dimensions: Call<PJRT_Buffer_Dimensions_Args>,
    pub PJRT_Buffer_UnpaddedDimensions: Unused,
    pub PJRT_Buffer_DynamicDimensionIndices: Unused,
    pub PJRT_Buffer_GetMemoryLayout: Unused,
    pub PJRT_Buffer_OnDeviceSizeInBytes: Unused,
    pub PJRT_Buffer_Device: Unused,
    pub PJRT_Buffer_Memory: Unused,
    pub PJRT_Buffer_Delete: Unused,
    pub PJRT_Buffer_IsDeleted: Unused,
    pub PJRT_Buffer_CopyToDevice: Unused,
    pub PJRT_Buffer_ToHostBuffer: Call<PJRT_Buffer_ToHostBuffer_Args>,
    pub PJRT_Buffer_IsOnCpu: Unused,
    pub PJRT_Buffer_ReadyEvent: Unused,
    pub PJRT_Buffer_UnsafePointer: Unused,
    pub PJRT_Buffer_IncreaseExternalReferenceCount: Unused,
    pub PJRT_Buffer_DecreaseExternalReferenceCount: Unused,
    pub PJRT_Buffer_OpaqueDeviceMemoryDataPointer: Unused,
    pub PJRT_CopyToDeviceStream_Destroy: Unused,
    pub PJRT_CopyToDeviceStream_AddChunk: Unused,
    pub PJRT_CopyToDeviceStream_TotalBytes: Unused,
    pub PJRT_CopyToDeviceStream_GranuleSize: Unused,
    pub PJRT_CopyToDeviceStream_CurrentBytes: Unused,
    pub PJRT_TopologyDescription_Create: Unused,
    pub PJRT_TopologyDescription_Destroy: Unused,
    pub PJRT_TopologyDescription_PlatformName: Unused,
    pub PJRT_TopologyDescription_PlatformVersion: Unused,
    pub PJRT_TopologyDescription_GetDeviceDescriptions: Unused,
    pub PJRT_TopologyDescription_Serialize: Unused,
    pub PJRT_TopologyDescription_Attributes: Unused,
    pub PJRT_Compile: Unused,
    pub PJRT_Executable_OutputElementTypes: Call<PJRT_Executable_OutputElementTypes_Args>,
    pub PJRT_Executable_OutputDimensions: Call<PJRT_Executable_OutputDimensions_Args>,
    pub PJRT_Buffer_CopyToMemory: Unused,
    pub PJRT_Client_CreateViewOfDeviceBuffer: Unused,
    pub PJRT_Executable_Fingerprint: Unused,
    pub PJRT_Client_TopologyDescription: Unused,
    pub PJRT_Executable_GetCompiledMemoryStats: Unused,
    pub PJRT_Memory_Kind_Id: Unused,
    pub PJRT_ExecuteContext_Create: Unused,
    pub PJRT_ExecuteContext_Destroy: Unused,
    pub PJRT_Buffer_CopyRawToHost: Unused,
    pub PJRT_AsyncHostToDeviceTransferManager_Destroy: Unused,
    pub PJRT_AsyncHostToDeviceTransferManager_TransferData: Unused,
    pub PJRT_Client_CreateBuffersForAsyncHostToDevice: Unused,
    pub PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer: Unused,
    pub PJRT_AsyncHostToDeviceTransferManager_Device: Unused,
    pub PJRT_AsyncHostToDeviceTransferManager_BufferCount: Unused,
    pub PJRT_AsyncHostToDeviceTransferManager_BufferSize: Unused,
    pub PJRT_AsyncHostToDeviceTransferManager_SetBufferError: Unused,
    pub PJRT_AsyncHostToDeviceTransferManager_AddMetadata: Unused,
    pub PJRT_Client_DmaMap: Unused,
    pub PJRT_Client_DmaUnmap: Unused,
    pub PJRT_Client_CreateUninitializedBuffer: Unused,
    pub PJRT_Client_UpdateGlobalProcessInfo: Unused,
    pub PJRT_TopologyDescription_Deserialize: Unused,
    pub PJRT_Client_CreateAliasBuffer: Unused,
    pub PJRT_Client_FulfillAliasBuffer: Unused,
    pub PJRT_LoadedExecutable_GetDeviceAssignment: Unused,
}

/// `GetPjrtApi`, the one symbol a PJRT plugin exports.
pub type GetPjrtApi = unsafe extern "C" fn() -> *const PJRT_Api;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn sizes_match_the_0_81_header() {
        // What gcc reports for the 0.81 header (PJRT_*_STRUCT_SIZE, sizeof, offsetof).
        assert_eq!(size_of::<PJRT_Api>(), 984);
        assert_eq!(
            std::mem::offset_of!(PJRT_Api, PJRT_LoadedExecutable_Execute),
            480
        );
        assert_eq!(
            std::mem::offset_of!(PJRT_Api, PJRT_Executable_OutputDimensions),
            768
        );
        assert_eq!(PJRT_Client_Create_Args::STRUCT_SIZE, 88);
        assert_eq!(PJRT_Error_GetCode_Args::STRUCT_SIZE, 28);
        assert_eq!(PJRT_Error_Message_Args::STRUCT_SIZE, 40);
        assert_eq!(PJRT_Plugin_Initialize_Args::STRUCT_SIZE, 16);
        assert_eq!(PJRT_Client_BufferFromHostBuffer_Args::STRUCT_SIZE, 120);
        assert_eq!(PJRT_LoadedExecutable_Execute_Args::STRUCT_SIZE, 80);
        assert_eq!(PJRT_ExecuteOptions::STRUCT_SIZE, 112);
        assert_eq!(PJRT_Buffer_ToHostBuffer_Args::STRUCT_SIZE, 56);
        assert_eq!(PJRT_Program::STRUCT_SIZE, 48);
        assert_eq!(PJRT_Client_Compile_Args::STRUCT_SIZE, 56);
        assert_eq!(PJRT_Executable_OutputDimensions_Args::STRUCT_SIZE, 48);
        assert_eq!(PJRT_Buffer_ElementType_Args::STRUCT_SIZE, 28);
        assert_eq!(PJRT_DeviceDescription_Id_Args::STRUCT_SIZE, 28);
        assert_eq!(size_of::<PJRT_NamedValue>(), 56);
        assert_eq!(size_of::<PJRT_Buffer_MemoryLayout_Tiled>(), 56);
        assert_eq!(
            std::mem::offset_of!(PJRT_Buffer_MemoryLayout, type_) + 4,
            PJRT_Buffer_MemoryLayout_STRUCT_SIZE
        );
    }
}
