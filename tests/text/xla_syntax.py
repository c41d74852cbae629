"""Hand-written modules in the syntax XLA and JAX print, one feature each, for the
grammar and parser tests (the corpus does not hold every form)."""

STACK_FRAMES = '''HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[8]{0})->f32[8]{0}}

FileNames
1 "/tmp/model.py"
2 "/usr/lib/python3/site-packages/jax/_src/numpy/lax_numpy.py"

FunctionNames
1 "f"
2 "<module>"

FileLocations
1 {file_name_id=1 function_name_id=1 line=7 end_line=7 column=10 end_column=21}
2 {file_name_id=2 function_name_id=2 line=12 end_line=12 column=2 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=1}


ENTRY %main.4 (Arg_0.1: f32[8]) -> f32[8] {
  %Arg_0.1 = f32[8]{0} parameter(0), metadata={op_name="x"}
  ROOT %sine.3 = f32[8]{0} sine(f32[8]{0} %Arg_0.1), metadata={op_name="jit(f)/jit(main)/sin" source_file="/tmp/model.py" source_line=7 stack_frame_id=2}
}
'''

COLLECTIVES = '''HloModule collectives, replica_count=2, num_partitions=4

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (p: f32[16,8]) -> (f32[16,8], f32[16,8], f32[16,8], f32[16,8]) {
  %p = f32[16,8]{1,0} parameter(0), sharding={devices=[2,2]<=[4]}
  %ar = f32[16,8]{1,0} all-reduce(f32[16,8]{1,0} %p), channel_id=1, replica_groups=[2,2]<=[4], use_global_device_ids=true, to_apply=%sum
  %ar2 = f32[16,8]{1,0} all-reduce(f32[16,8]{1,0} %ar), replica_groups={{0,1},{2,3}}, to_apply=%sum, sharding={replicated}
  %cp = f32[16,8]{1,0} collective-permute(f32[16,8]{1,0} %ar2), channel_id=2, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  %ag = f32[16,8]{1,0} all-gather(f32[16,8]{1,0} %cp), channel_id=3, replica_groups=[1,4]<=[2,2]T(1,0), dimensions={0}, sharding={maximal device=0}
  ROOT %t = (f32[16,8]{1,0}, f32[16,8]{1,0}, f32[16,8]{1,0}, f32[16,8]{1,0}) tuple(f32[16,8]{1,0} %ar, f32[16,8]{1,0} %ar2, f32[16,8]{1,0} %cp, f32[16,8]{1,0} %ag), sharding={{replicated}, {devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}, {maximal device=1}, {manual}}
}
'''

CUSTOM_CALLS = '''HloModule custom_calls, input_output_alias={ {0}: (0, {}, may-alias) }, buffer_donor={ (1, {}) }

ENTRY %main (a: f32[4], b: f32[4]) -> (f32[4], f32[4]) {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  %c1 = f32[4]{0} custom-call(f32[4]{0} %a), custom_call_target="foo\\"bar", backend_config="opaque string", api_version=API_VERSION_STATUS_RETURNING
  %c2 = f32[4]{0} custom-call(f32[4]{0} %c1, f32[4]{0} %b), custom_call_target="baz", operand_layout_constraints={f32[4]{0}, f32[4]{0}}, output_to_operand_aliasing={{}: (0, {})}, custom_call_has_side_effect=true
  %c3 = f32[4]{0} custom-call(f32[4]{0} %c2), custom_call_target="lit", literal=s32[2]{0} {1, 2}
  %c4 = f32[4]{0} custom-call(f32[4]{0} %c3), custom_call_target="lit", literal=( s32[4]{0} {4, 128, 128, 3}, pred[4]{0} {1, 0, 0, 0} )
  %c5 = f32[4]{0} custom-call(f32[4]{0} %c4), custom_call_target="lit", literal=f32[] 0.1
  %c6 = f32[4]{0} custom-call(f32[4]{0} %c5), custom_call_target="json", backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"fused_computation":{"sizes":[16, 32]},"force_earliest_schedule":false}
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(f32[4]{0} %c6, f32[4]{0} %b), frontend_attributes={composite.attributes={n = 1 : i32, tensor = dense<1> : tensor<i32>},composite.name="foo.bar",composite.version="1"}
}
'''

LITERALS = '''HloModule literals

ENTRY %main () -> (f32[2,2], c64[2], f32[4], s32[3], pred[2], (f32[], s32[]), u8[2], f32[2]) {
  %nested = f32[2,2]{1,0} constant({ { 1, 2 }, { 3, 4.5 } })
  %cplx = c64[2]{0} constant({(1, 0), (2.5, -1)})
  %special = f32[4]{0} constant({inf, -inf, nan, -nan})
  %neg = s32[3]{0} constant({-1, 0, 2147483647})
  %preds = pred[2]{0} constant({true, false})
  %tup = (f32[], s32[]) constant((1.5, 7))
  %hex = u8[2]{0} constant({0x1f, 0xff})
  %exp = f32[2]{0} constant({1e-05, -3.5E+10})
  ROOT %t = (f32[2,2]{1,0}, c64[2]{0}, f32[4]{0}, s32[3]{0}, pred[2]{0}, /*index=5*/(f32[], s32[]), u8[2]{0}, f32[2]{0}) tuple(f32[2,2]{1,0} %nested, c64[2]{0} %cplx, f32[4]{0} %special, s32[3]{0} %neg, pred[2]{0} %preds, /*index=5*/(f32[], s32[]) %tup, u8[2]{0} %hex, f32[2]{0} %exp)
}
'''

CONTROL_FLOW = '''HloModule control_flow, entry_computation_layout={(s32[], f32[4]{0})->f32[4]{0}}

%cond (t: (s32[], f32[4])) -> pred[] {
  %t = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[4]{0}) %t), index=0
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(s32[] %i, s32[] %n), direction=LT, type=SIGNED
}

%body (t.1: (s32[], f32[4])) -> (s32[], f32[4]) {
  %t.1 = (s32[], f32[4]{0}) parameter(0)
  %i.1 = s32[] get-tuple-element((s32[], f32[4]{0}) %t.1), index=0
  %one = s32[] constant(1)
  %i.2 = s32[] add(s32[] %i.1, s32[] %one)
  %v = f32[4]{0} get-tuple-element((s32[], f32[4]{0}) %t.1), index=1
  ROOT %r = (s32[], f32[4]{0}) tuple(s32[] %i.2, f32[4]{0} %v)
}

%branch0 (x: f32[4]) -> f32[4] {
  ROOT %x = f32[4]{0} parameter(0)
}

%branch1 (y: f32[4]) -> f32[4] {
  %y = f32[4]{0} parameter(0)
  ROOT %neg = f32[4]{0} negate(f32[4]{0} %y)
}

%host (h: f32[4]) -> f32[4] {
  ROOT %h = f32[4]{0} parameter(0)
}, execution_thread="host"

ENTRY %main (k: s32[], p: f32[4]) -> f32[4] {
  %k = s32[] parameter(0)
  %p = f32[4]{0} parameter(1)
  %init = (s32[], f32[4]{0}) tuple(s32[] %k, f32[4]{0} %p)
  %w = (s32[], f32[4]{0}) while((s32[], f32[4]{0}) %init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"10"}}
  %wv = f32[4]{0} get-tuple-element((s32[], f32[4]{0}) %w), index=1
  %c = f32[4]{0} conditional(s32[] %k, f32[4]{0} %wv, f32[4]{0} %p), branch_computations={%branch0, %branch1}
  %start = ((f32[4]{0}), f32[4]{0}, s32[]) async-start(f32[4]{0} %c), async_execution_thread="host", calls=%host
  %done = f32[4]{0} async-done(((f32[4]{0}), f32[4]{0}, s32[]) %start)
  ROOT %out = f32[4]{0} copy(f32[4]{0} %done), control-predecessors={%wv}
}
'''

SHORT_FORM = '''// Short form: no '%', no operand shapes, no signatures, no ROOT
HloModule short:

add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  add = f32[] add(lhs, rhs)
}

ENTRY entry {
  p0 = f32[4,<=8]{1,0} parameter(0)
  p1 = bf16[2,3]{1,0:T(2,128)(2,1)} parameter(1)
  c = f32[] constant(0)
  r = f32[4]{0} reduce(p0, c), dimensions={1}, to_apply=add
  conv = f32[1,2,1]{2,1,0} convolution(f32[1,2,1]{2,1,0} p0, f32[1,1,1]{2,1,0} p0), window={size=1 pad=0_0 lhs_dilate=1}, dim_labels=b0f_0io->b0f, operand_precision={high,default}
  s = f32[2]{0} slice(r), slice={[0:2:1]}
  pad = f32[4]{0} pad(s, c), padding=1_1_0
  d = f32[2,2]{1,0} dot(p0, p0), lhs_contracting_dims={1}, rhs_contracting_dims={1}, sparsity=L.1@2:4, algorithm=dot_bf16_bf16_f32
  tok = token[] after-all()
  t = (f32[4], token[]) tuple(r, tok)
}
'''

CRLF = SHORT_FORM.replace("\n", "\r\n")

# Instructions written as operands (XLA's parser names them after their opcode), nested.
NESTED_OPERANDS = '''HloModule nested
ENTRY %c (q: s32[]) -> (f32[8,7], pred[], f32[]) {
  %r = f32[8,7] reshape(f32[1,8,1,7] parameter(1))
  %q = s32[] parameter(0)
  %p = pred[] compare(%q, s32[] constant(5)), direction=LT
  ROOT %t = (f32[8,7], pred[], f32[]) tuple(%r, %p, f32[] add(f32[] constant(1), f32[] negate(f32[] constant(2))))
}
'''

# Signature forms: a parameter without ':', an ENTRY without a name.
SIGNATURES = '''HloModule sigs
%neg (operand f64[2,2]) -> f64[2,2] {
  %operand = f64[2,2] parameter(0)
  ROOT %n = f64[2,2] negate(%operand)
}
ENTRY (x: f64[2,2]) -> f64[2,2] {
  %x = f64[2,2] parameter(0)
  ROOT %c = f64[2,2] call(%x), to_apply=%neg
}
'''

# Computations written in place of their name, on one line or several.
INLINE_COMPUTATIONS = '''HloModule inline
ENTRY %e {
  %p = f32[8] parameter(0)
  %z = f32[] constant(0)
  %r = f32[] reduce(%p, %z), dimensions={0}, to_apply={ %a = f32[] parameter(0)  %b = f32[] parameter(1)  ROOT %s = f32[] add(%a, %b) }
  ROOT %r2 = f32[] reduce(%p, %r), dimensions={0}, to_apply={
    x = f32[] parameter(0)
    y = f32[] parameter(1)
    ROOT m = f32[] maximum(x, y)
  }, metadata={op_name="max"}
}
'''

# A quoted module name that is no identifier: printed quoted again.
QUOTED_NAME = '''HloModule "jit(f)/a b.c"
ENTRY %e {
  ROOT %c = f32[] constant(1)
}
'''

# Async shorthand: `X-start` / `X-done` wrap op X in an async computation (any op, not
# only those with async opcodes of their own).
ASYNC_SUGAR = '''HloModule async_sugar
%callee (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %n = f32[4] negate(%x)
}
ENTRY %e (p: f32[4], i: s32[], u: f32[2]) -> (f32[4], f32[2], f32[4], f32[4]) {
  %p = f32[4] parameter(0)
  %i = s32[] parameter(1)
  %u = f32[2] parameter(2)
  %cs = ((f32[4]), f32[4], s32[]) call-start(%p), to_apply=%callee
  %cd = f32[4] call-done(%cs)
  %ds = ((f32[4], s32[]), f32[2], s32[]) dynamic-slice-start(%p, %i), dynamic_slice_sizes={2}
  %dd = f32[2] dynamic-slice-done(%ds)
  %us = ((f32[4], f32[2], s32[]), f32[4], s32[]) dynamic-update-slice-start(%p, %u, %i)
  %uu = ((f32[4], f32[2], s32[]), f32[4], s32[]) dynamic-update-slice-update(%us)
  %ud = f32[4] dynamic-update-slice-done(%uu)
  %es = ((f32[4]), f32[4], s32[]) exponential-start(%p), async_execution_thread="side"
  %ed = f32[4] exponential-done(%es)
  ROOT %t = (f32[4], f32[2], f32[4], f32[4]) tuple(%cd, %dd, %ud, %ed)
}
'''

MODULES = {
    "stack_frames": STACK_FRAMES,
    "collectives": COLLECTIVES,
    "custom_calls": CUSTOM_CALLS,
    "literals": LITERALS,
    "control_flow": CONTROL_FLOW,
    "short_form": SHORT_FORM,
    "crlf": CRLF,
    "nested_operands": NESTED_OPERANDS,
    "signatures": SIGNATURES,
    "inline_computations": INLINE_COMPUTATIONS,
    "quoted_name": QUOTED_NAME,
    "async_sugar": ASYNC_SUGAR,
}
