//! Safe wrappers over the C++ shim (cpp/shim.cpp): op lookup, schemas, call plans, stacks.

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::NonNull;
use std::sync::Arc;

use graphbug_ir::OpName;
use once_cell::sync::Lazy;
use parking_lot::Mutex;
use tch::Tensor;
use torch_sys::C_tensor;

use crate::error::{AtenError, Result};
use crate::schema::Schema;

extern "C" {
    fn gb_free_str(s: *mut c_char);
    fn gb_torch_version() -> *const c_char;
    fn gb_op_find(
        name: *const c_char,
        overload: *const c_char,
        out: *mut *mut c_void,
    ) -> *mut c_char;
    fn gb_op_free(op: *mut c_void);
    fn gb_op_schema_json(op: *mut c_void, out: *mut *mut c_char) -> *mut c_char;
    fn gb_plan_new(op: *mut c_void) -> *mut c_void;
    fn gb_plan_free(plan: *mut c_void);
    fn gb_plan_push_none(plan: *mut c_void);
    fn gb_plan_push_int(plan: *mut c_void, v: i64);
    fn gb_plan_push_double(plan: *mut c_void, v: f64);
    fn gb_plan_push_complex(plan: *mut c_void, re: f64, im: f64);
    fn gb_plan_push_bool(plan: *mut c_void, v: u8);
    fn gb_plan_push_str(plan: *mut c_void, v: *const c_char);
    fn gb_plan_push_int_list(plan: *mut c_void, v: *const i64, n: usize);
    fn gb_plan_push_double_list(plan: *mut c_void, v: *const f64, n: usize);
    fn gb_plan_push_bool_list(plan: *mut c_void, v: *const u8, n: usize);
    fn gb_plan_push_device(plan: *mut c_void, device: *const c_char) -> *mut c_char;
    fn gb_plan_push_scalar_tensor(plan: *mut c_void, kind: u8, i: i64, d: f64) -> *mut c_char;
    fn gb_plan_push_default(plan: *mut c_void, arg_index: usize) -> *mut c_char;
    fn gb_plan_push_tensor_hole(plan: *mut c_void);
    fn gb_plan_push_list_hole(plan: *mut c_void, present: *const u8, n: usize, optional: u8);
    fn gb_plan_num_tensors(plan: *mut c_void) -> usize;
    fn gb_plan_call(
        plan: *mut c_void,
        tensors: *const *const C_tensor,
        n: usize,
        stack: *mut c_void,
        with_autograd: u8,
    ) -> *mut c_char;
    fn gb_stack_new() -> *mut c_void;
    fn gb_stack_free(stack: *mut c_void);
    fn gb_stack_len(stack: *mut c_void) -> usize;
    fn gb_stack_kind(stack: *mut c_void, i: usize) -> i32;
    fn gb_stack_tensor(stack: *mut c_void, i: usize) -> *mut C_tensor;
    fn gb_stack_list_len(stack: *mut c_void, i: usize) -> usize;
    fn gb_stack_list_tensor(stack: *mut c_void, i: usize, j: usize) -> *mut C_tensor;
    fn gb_stack_int(stack: *mut c_void, i: usize) -> i64;
    fn gb_stack_double(stack: *mut c_void, i: usize) -> f64;
    fn gb_stack_bool(stack: *mut c_void, i: usize) -> u8;
    fn gb_stack_describe(stack: *mut c_void, i: usize) -> *mut c_char;
    fn gb_tensor_device(t: *const C_tensor) -> *mut c_char;
    fn gb_register_fault_op() -> *mut c_char;
    fn gb_tensor_storage_ptr(t: *const C_tensor) -> usize;
    fn gb_tensor_storage_nbytes(t: *const C_tensor) -> usize;
    fn gb_op_is_composite(op: *mut c_void) -> bool;
    fn gb_op_is_random(op: *mut c_void) -> bool;
    fn gb_tensor_zeros_like(
        t: *const C_tensor,
        device: *const c_char,
        out: *mut *mut C_tensor,
    ) -> *mut c_char;
    fn gb_tensor_to(
        t: *const C_tensor,
        device: *const c_char,
        out: *mut *mut C_tensor,
    ) -> *mut c_char;
    fn gb_tensor_scalar_type(t: *const C_tensor) -> i32;
    fn gb_cpu_rng_state(out: *mut *mut C_tensor) -> *mut c_char;
    fn gb_cpu_rng_set_state(state: *const C_tensor) -> *mut c_char;
    fn gb_tensor_to_dtype(t: *const C_tensor, code: i64, out: *mut *mut C_tensor) -> *mut c_char;
    fn gb_tensor_view_dtype(t: *const C_tensor, code: i64, out: *mut *mut C_tensor) -> *mut c_char;
    fn gb_op_overloads(qualified: *const c_char, out: *mut *mut c_char) -> *mut c_char;
    fn gb_ops_with_tag(tag: *const c_char, out: *mut *mut c_char) -> *mut c_char;
    fn gb_all_ops(out: *mut *mut c_char) -> *mut c_char;
    fn gb_recorder_new(out: *mut *mut c_void) -> *mut c_char;
    fn gb_recorder_free(r: *mut c_void);
    fn gb_recorder_set_stand_in_limit(r: *mut c_void, bytes: u64);
    fn gb_recorder_set(r: *mut c_void, on: u8, phase: i32);
    fn gb_recorder_label(r: *mut c_void, t: *const C_tensor, label: *const c_char) -> *mut c_char;
    fn gb_recorder_grad(
        r: *mut c_void,
        outputs: *const *const C_tensor,
        grads: *const *const C_tensor,
        n_out: usize,
        inputs: *const *const C_tensor,
        n_in: usize,
    ) -> *mut c_char;
    fn gb_recorder_json(r: *mut c_void, out: *mut *mut c_char) -> *mut c_char;
}

/// Takes ownership of a malloc'd C string from the shim.
fn take_string(p: *mut c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the shim returns NUL-terminated strings from malloc, freed exactly once here.
    unsafe {
        let s = CStr::from_ptr(p).to_string_lossy().into_owned();
        gb_free_str(p);
        s
    }
}

/// Turns a shim status (null = ok, else a message) into a Result.
fn status(p: *mut c_char) -> std::result::Result<(), String> {
    if p.is_null() {
        Ok(())
    } else {
        Err(take_string(p))
    }
}

fn c_string(s: &str) -> std::result::Result<CString, String> {
    CString::new(s).map_err(|_| format!("`{s}` contains a NUL byte"))
}

/// A libtorch operator overload and its schema.
pub struct Op {
    handle: NonNull<c_void>,
    /// The op's schema, read from the dispatcher.
    pub schema: Arc<Schema>,
    /// The op as the graph names it.
    pub name: OpName,
}

// SAFETY: a c10::OperatorHandle is an immutable reference into the dispatcher's registry,
// which is safe to use from any thread.
unsafe impl Send for Op {}
unsafe impl Sync for Op {}

impl Drop for Op {
    fn drop(&mut self) {
        // SAFETY: the handle came from gb_op_find and is freed once.
        unsafe { gb_op_free(self.handle.as_ptr()) }
    }
}

static OPS: Lazy<Mutex<HashMap<OpName, Arc<Op>>>> = Lazy::new(|| Mutex::new(HashMap::new()));

impl Op {
    /// Looks an op up in libtorch's dispatcher (cached). `default` is the unnamed overload.
    pub fn find(name: &OpName) -> Result<Arc<Op>> {
        if let Some(op) = OPS.lock().get(name) {
            return Ok(op.clone());
        }
        if name.namespace == "graphbug" {
            register_fault_op()?;
        }
        let unknown = |message: String| AtenError::UnknownOp {
            op: name.to_string(),
            node: None,
            message,
        };
        let qualified = c_string(&format!("{}::{}", name.namespace, name.name)).map_err(unknown)?;
        let overload = if name.overload == "default" {
            ""
        } else {
            name.overload.as_str()
        };
        let overload = c_string(overload).map_err(unknown)?;
        let mut handle: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid C strings; `handle` is written on success only.
        status(unsafe { gb_op_find(qualified.as_ptr(), overload.as_ptr(), &mut handle) })
            .map_err(unknown)?;
        let handle = NonNull::new(handle).ok_or_else(|| unknown("no handle returned".into()))?;
        let mut json: *mut c_char = std::ptr::null_mut();
        // SAFETY: the handle is valid; the JSON string is owned by us afterwards.
        let schema = status(unsafe { gb_op_schema_json(handle.as_ptr(), &mut json) })
            .and_then(|()| Schema::from_json(&take_string(json)));
        let schema = match schema {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: the handle is not shared yet and is freed once.
                unsafe { gb_op_free(handle.as_ptr()) };
                return Err(unknown(e));
            }
        };
        let op = Arc::new(Op {
            handle,
            schema: Arc::new(schema),
            name: name.clone(),
        });
        OPS.lock().insert(name.clone(), op.clone());
        Ok(op)
    }
}

impl Op {
    /// Whether libtorch runs the op as a composite of other ops (its only kernel is
    /// CompositeImplicitAutograd): such an op may copy where its schema declares an alias
    /// (`reshape` of a tensor no view can give), where an op with kernels of its own
    /// (`view`) never does.
    pub fn is_composite(&self) -> bool {
        // SAFETY: the handle is valid for the op's life.
        unsafe { gb_op_is_composite(self.handle.as_ptr()) }
    }

    /// Whether the op draws random numbers: libtorch tags it `nondeterministic_seeded`
    /// (`bernoulli`, `rand`, `native_dropout`, `uniform`, ...).
    pub fn is_random(&self) -> bool {
        // SAFETY: the handle is valid for the op's life.
        unsafe { gb_op_is_random(self.handle.as_ptr()) }
    }
}

static OVERLOADS: Lazy<Mutex<HashMap<String, Vec<String>>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));

/// Every overload of `namespace::name` registered with the dispatcher (`default` for the
/// unnamed one), sorted; cached.
pub fn overloads(namespace: &str, name: &str) -> Vec<String> {
    let qualified = format!("{namespace}::{name}");
    if let Some(hit) = OVERLOADS.lock().get(&qualified) {
        return hit.clone();
    }
    let Ok(c) = c_string(&qualified) else {
        return Vec::new();
    };
    let mut out: *mut c_char = std::ptr::null_mut();
    // SAFETY: a valid C string; the JSON is owned by us afterwards.
    let names: Vec<String> = status(unsafe { gb_op_overloads(c.as_ptr(), &mut out) })
        .ok()
        .and_then(|()| serde_json::from_str(&take_string(out)).ok())
        .unwrap_or_default();
    let mut names: Vec<String> = names
        .into_iter()
        .map(|o| if o.is_empty() { "default".into() } else { o })
        .collect();
    names.sort();
    OVERLOADS.lock().insert(qualified, names.clone());
    names
}

/// Every op registered with the dispatcher that carries libtorch's op tag `tag`
/// (`nondeterministic_seeded`, `pointwise`), as `namespace.name` (overload packets),
/// sorted: what `graphbug_ir::op_tags` holds for the pure crates.
pub fn ops_with_tag(tag: &str) -> std::result::Result<Vec<String>, String> {
    let c = c_string(tag)?;
    let mut out: *mut c_char = std::ptr::null_mut();
    // SAFETY: a valid C string; the JSON is owned by us afterwards.
    status(unsafe { gb_ops_with_tag(c.as_ptr(), &mut out) })?;
    let names: Vec<String> =
        serde_json::from_str(&take_string(out)).map_err(|e| format!("bad op list: {e}"))?;
    Ok(names
        .into_iter()
        .map(|n| n.replacen("::", ".", 1))
        .collect())
}

/// Every op registered with libtorch's dispatcher (`default` for unnamed overloads), sorted.
pub fn all_ops() -> Result<Vec<OpName>> {
    let mut out: *mut c_char = std::ptr::null_mut();
    // SAFETY: the JSON is owned by us afterwards.
    status(unsafe { gb_all_ops(&mut out) })
        .map_err(|m| AtenError::BadInputs(format!("listing libtorch's ops: {m}")))?;
    let pairs: Vec<(String, String)> = serde_json::from_str(&take_string(out))
        .map_err(|e| AtenError::BadInputs(format!("listing libtorch's ops: {e}")))?;
    let mut ops: Vec<OpName> = pairs
        .into_iter()
        .map(|(qualified, overload)| {
            let (namespace, name) = qualified.split_once("::").unwrap_or(("aten", &qualified));
            let overload = if overload.is_empty() {
                "default"
            } else {
                &overload
            };
            OpName::new(namespace, name, overload)
        })
        .collect();
    ops.sort_by_key(ToString::to_string);
    Ok(ops)
}

/// A prepared call of one op: constant arguments converted once, tensor arguments as holes.
pub struct Plan {
    ptr: NonNull<c_void>,
    op: Arc<Op>,
}

// SAFETY: a finished plan is only read by gb_plan_call (which copies its template into the
// caller's stack), so sharing it between threads is safe.
unsafe impl Send for Plan {}
unsafe impl Sync for Plan {}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: created by gb_plan_new, freed once.
        unsafe { gb_plan_free(self.ptr.as_ptr()) }
    }
}

impl Plan {
    /// An empty plan for `op`; push one entry per schema argument, in order.
    pub fn new(op: Arc<Op>) -> Plan {
        // SAFETY: the op handle is valid for the op's lifetime, which the plan extends.
        let ptr = unsafe { gb_plan_new(op.handle.as_ptr()) };
        Plan {
            ptr: NonNull::new(ptr).expect("operator new never returns null"),
            op,
        }
    }

    /// The op this plan calls.
    pub fn op(&self) -> &Arc<Op> {
        &self.op
    }

    fn p(&self) -> *mut c_void {
        self.ptr.as_ptr()
    }

    /// Pushes `None`.
    pub fn push_none(&mut self) {
        unsafe { gb_plan_push_none(self.p()) }
    }

    /// Pushes an int.
    pub fn push_int(&mut self, v: i64) {
        unsafe { gb_plan_push_int(self.p(), v) }
    }

    /// Pushes a float.
    pub fn push_double(&mut self, v: f64) {
        unsafe { gb_plan_push_double(self.p(), v) }
    }

    /// Pushes a complex number.
    pub fn push_complex(&mut self, re: f64, im: f64) {
        unsafe { gb_plan_push_complex(self.p(), re, im) }
    }

    /// Pushes a bool.
    pub fn push_bool(&mut self, v: bool) {
        unsafe { gb_plan_push_bool(self.p(), u8::from(v)) }
    }

    /// Pushes a string.
    pub fn push_str(&mut self, v: &str) -> std::result::Result<(), String> {
        let c = c_string(v)?;
        unsafe { gb_plan_push_str(self.p(), c.as_ptr()) };
        Ok(())
    }

    /// Pushes an int list.
    pub fn push_int_list(&mut self, v: &[i64]) {
        unsafe { gb_plan_push_int_list(self.p(), v.as_ptr(), v.len()) }
    }

    /// Pushes a float list.
    pub fn push_double_list(&mut self, v: &[f64]) {
        unsafe { gb_plan_push_double_list(self.p(), v.as_ptr(), v.len()) }
    }

    /// Pushes a bool list.
    pub fn push_bool_list(&mut self, v: &[bool]) {
        let bytes: Vec<u8> = v.iter().map(|&b| u8::from(b)).collect();
        unsafe { gb_plan_push_bool_list(self.p(), bytes.as_ptr(), bytes.len()) }
    }

    /// Pushes a Python number given for a Tensor argument, as a 0-dim wrapped-number tensor.
    pub fn push_scalar_tensor(
        &mut self,
        v: &graphbug_ir::Value,
    ) -> std::result::Result<(), String> {
        let (kind, i, d) = match v {
            graphbug_ir::Value::Int(i) => (0, *i, 0.0),
            graphbug_ir::Value::Float(f) => (1, 0, *f),
            graphbug_ir::Value::Bool(b) => (2, i64::from(*b), 0.0),
            _ => return Err("expected a number".into()),
        };
        status(unsafe { gb_plan_push_scalar_tensor(self.p(), kind, i, d) })
    }

    /// Pushes a device given as torch spells it (`cpu`, `cuda:0`, `meta`).
    pub fn push_device(&mut self, device: &str) -> std::result::Result<(), String> {
        let c = c_string(device)?;
        status(unsafe { gb_plan_push_device(self.p(), c.as_ptr()) })
    }

    /// Pushes the schema's default for argument `index`.
    pub fn push_default(&mut self, index: usize) -> std::result::Result<(), String> {
        status(unsafe { gb_plan_push_default(self.p(), index) })
    }

    /// Pushes a tensor hole, filled by the next tensor of each call.
    pub fn push_tensor_hole(&mut self) {
        unsafe { gb_plan_push_tensor_hole(self.p()) }
    }

    /// Pushes a `Tensor[]` (or, with `optional`, `Tensor?[]`) hole; `present[i]` false
    /// means a fixed `None` element.
    pub fn push_list_hole(&mut self, present: &[bool], optional: bool) {
        let bytes: Vec<u8> = present.iter().map(|&b| u8::from(b)).collect();
        unsafe { gb_plan_push_list_hole(self.p(), bytes.as_ptr(), bytes.len(), u8::from(optional)) }
    }

    /// Number of tensors each call must supply.
    pub fn num_tensors(&self) -> usize {
        unsafe { gb_plan_num_tensors(self.p()) }
    }

    /// Calls the op with `tensors` filling the holes, leaving its results on `stack`;
    /// with `autograd`, libtorch records its autograd graph as it runs.
    pub fn call(
        &self,
        tensors: &[*const C_tensor],
        stack: &mut Stack,
        autograd: bool,
    ) -> std::result::Result<(), String> {
        // SAFETY: every pointer is a live at::Tensor owned by the caller for the call's
        // duration; the shim checks the count.
        status(unsafe {
            gb_plan_call(
                self.p(),
                tensors.as_ptr(),
                tensors.len(),
                stack.ptr.as_ptr(),
                u8::from(autograd),
            )
        })
    }
}

/// One value an op returned.
pub enum StackValue {
    /// `None` or an undefined tensor.
    None,
    /// A tensor.
    Tensor(Tensor),
    /// A tensor list.
    TensorList(Vec<Tensor>),
    /// An int.
    Int(i64),
    /// A float.
    Double(f64),
    /// A bool.
    Bool(bool),
}

/// A dispatcher stack holding an op's results.
pub struct Stack {
    ptr: NonNull<c_void>,
}

// SAFETY: the stack is owned by one caller at a time.
unsafe impl Send for Stack {}

impl Default for Stack {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        unsafe { gb_stack_free(self.ptr.as_ptr()) }
    }
}

impl Stack {
    /// An empty stack.
    pub fn new() -> Stack {
        Stack {
            ptr: NonNull::new(unsafe { gb_stack_new() }).expect("operator new never returns null"),
        }
    }

    /// Number of values on the stack.
    pub fn len(&self) -> usize {
        unsafe { gb_stack_len(self.ptr.as_ptr()) }
    }

    /// True when the stack is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes value `i` (tensors become new handles; the stack keeps its references).
    pub fn get(&self, i: usize) -> std::result::Result<StackValue, String> {
        let s = self.ptr.as_ptr();
        // SAFETY: accessors check bounds and kinds and return neutral values otherwise;
        // tensor pointers they return are new heap handles we own.
        unsafe {
            Ok(match gb_stack_kind(s, i) {
                0 | 6 => StackValue::None,
                1 => StackValue::Tensor(Tensor::from_ptr(gb_stack_tensor(s, i))),
                2 => {
                    let n = gb_stack_list_len(s, i);
                    StackValue::TensorList(
                        (0..n)
                            .map(|j| Tensor::from_ptr(gb_stack_list_tensor(s, i, j)))
                            .collect(),
                    )
                }
                3 => StackValue::Int(gb_stack_int(s, i)),
                4 => StackValue::Double(gb_stack_double(s, i)),
                5 => StackValue::Bool(gb_stack_bool(s, i) != 0),
                _ => {
                    return Err(format!(
                        "unsupported result of kind {}",
                        take_string(gb_stack_describe(s, i))
                    ))
                }
            })
        }
    }
}

/// The device of a tensor as torch spells it (`cpu`, `cuda:0`, `meta`); tch cannot tell meta.
pub fn tensor_device(t: &Tensor) -> String {
    // SAFETY: a live tensor; the string is owned by us afterwards.
    take_string(unsafe { gb_tensor_device(t.as_ptr()) })
}

/// The `c10::ScalarType` code of a defined tensor (tch's `Kind` lacks uint16/32/64).
pub fn scalar_type(t: &Tensor) -> i32 {
    // SAFETY: a live tensor; the shim only reads its dtype.
    unsafe { gb_tensor_scalar_type(t.as_ptr()) }
}

/// `t`'s values converted to the dtype with `c10::ScalarType` code `code`.
pub fn tensor_to_dtype(t: &Tensor, code: i64) -> std::result::Result<Tensor, String> {
    dtype_op(t, code, gb_tensor_to_dtype)
}

/// `t`'s bits viewed as the dtype with `c10::ScalarType` code `code` (same element size).
pub fn tensor_view_dtype(t: &Tensor, code: i64) -> std::result::Result<Tensor, String> {
    dtype_op(t, code, gb_tensor_view_dtype)
}

/// Calls a shim function that makes one new tensor from `t` and a dtype code.
fn dtype_op(
    t: &Tensor,
    code: i64,
    f: unsafe extern "C" fn(*const C_tensor, i64, *mut *mut C_tensor) -> *mut c_char,
) -> std::result::Result<Tensor, String> {
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: a live tensor; `out` is a new handle we own on success.
    status(unsafe { f(t.as_ptr(), code, &mut out) })?;
    if out.is_null() {
        return Err("no tensor returned".into());
    }
    Ok(unsafe { Tensor::from_ptr(out) })
}

/// Calls a shim function that makes one new tensor from `t` on `device`.
fn tensor_op(
    t: &Tensor,
    device: &str,
    f: unsafe extern "C" fn(*const C_tensor, *const c_char, *mut *mut C_tensor) -> *mut c_char,
) -> std::result::Result<Tensor, String> {
    let dev = c_string(device)?;
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: a live tensor and a valid C string; `out` is a new handle we own on success.
    status(unsafe { f(t.as_ptr(), dev.as_ptr(), &mut out) })?;
    if out.is_null() {
        return Err("no tensor returned".into());
    }
    Ok(unsafe { Tensor::from_ptr(out) })
}

/// A zero-filled tensor with `t`'s sizes and dtype on `device` (`t` may be a meta tensor).
pub fn zeros_like_on(t: &Tensor, device: &str) -> std::result::Result<Tensor, String> {
    tensor_op(t, device, gb_tensor_zeros_like)
}

/// `t` moved to `device`; to `meta` it keeps only sizes, strides and dtype.
pub fn tensor_to(t: &Tensor, device: &str) -> std::result::Result<Tensor, String> {
    tensor_op(t, device, gb_tensor_to)
}

/// libtorch's default CPU generator's state, put back when this is dropped: random ops run
/// meanwhile (dropout in a run on stand-ins) draw no number a later run would have drawn.
pub struct CpuRngGuard(Tensor);

impl CpuRngGuard {
    /// Saves the state.
    pub fn new() -> std::result::Result<CpuRngGuard, String> {
        let mut out: *mut C_tensor = std::ptr::null_mut();
        // SAFETY: the shim writes a new tensor to `out` when it returns no error.
        status(unsafe { gb_cpu_rng_state(&mut out) })?;
        // SAFETY: `out` is a tensor the shim allocated, now owned here.
        Ok(CpuRngGuard(unsafe { Tensor::from_ptr(out) }))
    }
}

impl Drop for CpuRngGuard {
    fn drop(&mut self) {
        // SAFETY: the saved state is a tensor the generator made.
        let _ = status(unsafe { gb_cpu_rng_set_state(self.0.as_ptr()) });
    }
}

static FAULT_OP: Lazy<std::result::Result<(), String>> =
    Lazy::new(|| status(unsafe { gb_register_fault_op() }));

/// Registers the `graphbug::fault(Tensor self, str kind, float amount, str message)` op
/// with the dispatcher (once per process). Kinds: `runtime` (raises `message`), `accuracy`
/// (adds `amount`), `nan`, `crash` (aborts the process), `hang` (never returns), and the
/// schema-breaking `alias`, `mutate` and `shape` (for testing checkers); on meta tensors it
/// passes the shape through.
pub fn register_fault_op() -> Result<()> {
    FAULT_OP.clone().map_err(|message| AtenError::UnknownOp {
        op: "graphbug::fault".into(),
        node: None,
        message,
    })
}

/// The address of a tensor's storage: two tensors alias when it is equal (0 for none).
pub fn storage_ptr(t: &Tensor) -> usize {
    // SAFETY: a live tensor; the shim only reads its storage pointer.
    unsafe { gb_tensor_storage_ptr(t.as_ptr()) }
}

/// The bytes of a tensor's storage (0 for none): what it holds alive, views included.
pub fn storage_nbytes(t: &Tensor) -> usize {
    // SAFETY: a live tensor; the shim only reads its storage's size.
    unsafe { gb_tensor_storage_nbytes(t.as_ptr()) }
}

/// The libtorch version graphbug is built against, e.g. `2.13.0`.
pub fn torch_version() -> String {
    // SAFETY: a static NUL-terminated string literal in the shim.
    unsafe { CStr::from_ptr(gb_torch_version()) }
        .to_string_lossy()
        .into_owned()
}

/// Records the aten calls libtorch makes on this thread (its autograd engine's backward
/// included), as AOTAutograd's tracing sees them: see `cpp/shim.cpp`.
pub struct Recorder {
    ptr: NonNull<c_void>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // SAFETY: the pointer came from gb_recorder_new and is freed once; freeing also
        // turns recording off on this thread if it was on.
        unsafe { gb_recorder_free(self.ptr.as_ptr()) }
    }
}

impl Recorder {
    /// A new, idle recorder.
    pub fn new() -> std::result::Result<Recorder, String> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is written on success only.
        status(unsafe { gb_recorder_new(&mut ptr) })?;
        let ptr = NonNull::new(ptr).ok_or("no recorder returned")?;
        // Ops without a meta kernel run on CPU stand-ins, bounded as in meta inference.
        let limit = crate::memory::available_bytes().unwrap_or(8 << 30) / 4;
        // SAFETY: a live recorder.
        unsafe { gb_recorder_set_stand_in_limit(ptr.as_ptr(), limit) };
        Ok(Recorder { ptr })
    }

    /// Runs `f` with recording on; its calls carry `phase`.
    pub fn record<T>(&mut self, phase: i32, f: impl FnOnce() -> T) -> T {
        // SAFETY: a live recorder, used on this thread only (it is not Send).
        unsafe { gb_recorder_set(self.ptr.as_ptr(), 1, phase) };
        let out = f();
        // SAFETY: as above.
        unsafe { gb_recorder_set(self.ptr.as_ptr(), 0, phase) };
        out
    }

    /// Names a tensor in the recording.
    pub fn label(&mut self, t: &Tensor, label: &str) -> std::result::Result<(), String> {
        let label = c_string(label)?;
        // SAFETY: a live recorder and tensor, a valid C string.
        status(unsafe { gb_recorder_label(self.ptr.as_ptr(), t.as_ptr(), label.as_ptr()) })
    }

    /// Back-propagates `grads` from `outputs` to `inputs` with libtorch's engine, recording
    /// the backward.
    pub fn grad(
        &mut self,
        outputs: &[&Tensor],
        grads: &[&Tensor],
        inputs: &[&Tensor],
    ) -> std::result::Result<(), String> {
        if outputs.len() != grads.len() {
            return Err(format!(
                "{} outputs but {} gradients",
                outputs.len(),
                grads.len()
            ));
        }
        let ptrs = |ts: &[&Tensor]| ts.iter().map(|t| t.as_ptr()).collect::<Vec<_>>();
        let (o, g, i) = (ptrs(outputs), ptrs(grads), ptrs(inputs));
        // SAFETY: live tensors; the arrays outlive the call.
        status(unsafe {
            gb_recorder_grad(
                self.ptr.as_ptr(),
                o.as_ptr(),
                g.as_ptr(),
                o.len(),
                i.as_ptr(),
                i.len(),
            )
        })
    }

    /// The recording as JSON (`calls`, `labels`, `results`).
    pub fn json(&self) -> std::result::Result<String, String> {
        let mut out: *mut c_char = std::ptr::null_mut();
        // SAFETY: a live recorder; the string is owned by us afterwards.
        status(unsafe { gb_recorder_json(self.ptr.as_ptr(), &mut out) })?;
        Ok(take_string(out))
    }
}
