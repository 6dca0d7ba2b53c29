"""Huawei's list of PyTorch APIs unsupported on Ascend (msFmkTransplt op_list_2_8.json, 240 names,
ascend-facts Appendix C) is data in rules/findings_unsupported_api.toml. Every name of the list is
either matched by a rule (NPU304 or a more specific code) or deliberately left out, with a reason."""

from __future__ import annotations

from npu_migrate.dispatch import migrate_source
from npu_migrate.rules import default_rules
from npu_migrate.kinds.finding import FindingSpec, match_kind_of, names_of

RULES = default_rules()

APPENDIX_C = [
    "torch.sparse.check_sparse_tensor_invariants", "torch.sparse.check_sparse_tensor_invariants.disable",
    "torch.sparse.check_sparse_tensor_invariants.enable",
    "torch.sparse.check_sparse_tensor_invariants.is_enabled", "torch.sparse.as_sparse_gradcheck",
    "torch.utils.mobile_optimizer.optimize_for_mobile", "torch.utils.cpp_extension.load",
    "torch.utils.dlpack.from_dlpack", "torch.utils.dlpack.to_dlpack",
    "torch.utils.generate_methods_for_privateuse1_backend", "torch.utils.get_cpp_backtrace",
    "torch.optim.Adadelta.step", "torch.optim.Adam.step", "torch.optim.LBFGS.step",
    "torch.distributed.elastic.rendezvous.etcd_rendezvous_backend.create_backend",
    "torch.distributed.elastic.rendezvous.etcd_rendezvous_backend.EtcdRendezvousBackend",
    "torch.distributed.elastic.rendezvous.etcd_rendezvous_backend.EtcdRendezvousBackend.get_state",
    "torch.distributed.elastic.rendezvous.etcd_rendezvous_backend.EtcdRendezvousBackend.name",
    "torch.distributed.elastic.rendezvous.etcd_rendezvous_backend.EtcdRendezvousBackend.set_state",
    "torch.distributed.elastic.rendezvous.etcd_rendezvous.EtcdRendezvousHandler",
    "torch.distributed.elastic.rendezvous.etcd_store.EtcdStore",
    "torch.distributed.elastic.rendezvous.etcd_store.EtcdStore.add",
    "torch.distributed.elastic.rendezvous.etcd_store.EtcdStore.check",
    "torch.distributed.elastic.rendezvous.etcd_store.EtcdStore.get",
    "torch.distributed.elastic.rendezvous.etcd_store.EtcdStore.set",
    "torch.distributed.elastic.rendezvous.etcd_store.EtcdStore.wait",
    "torch.distributed.elastic.rendezvous.etcd_server.EtcdServer",
    "torch.distributed.optim.DistributedOptimizer", "torch.distributed.optim.DistributedOptimizer.step",
    "torch.distributed.fsdp.FullyShardedDataParallel.flatten_sharded_optim_state_dict",
    "torch.distributed.fsdp.FullyShardedDataParallel.get_state_dict_type",
    "torch.distributed.fsdp.FullyShardedDataParallel.module",
    "torch.distributed.fsdp.FullyShardedDataParallel.optim_state_dict",
    "torch.distributed.fsdp.FullyShardedDataParallel.rekey_optim_state_dict",
    "torch.distributed.fsdp.FullyShardedDataParallel.scatter_full_optim_state_dict",
    "torch.distributed.fsdp.FullyShardedDataParallel.set_state_dict_type",
    "torch.distributed.fsdp.FullyShardedDataParallel.shard_full_optim_state_dict",
    "torch.distributed.fsdp.FullyShardedDataParallel.sharded_optim_state_dict",
    "torch.distributed.fsdp.FullyShardedDataParallel.summon_full_params",
    "torch.distributed.tensor.parallel.parallelize_module",
    "torch.distributed.tensor.parallel.ColwiseParallel", "torch.distributed.tensor.parallel.RowwiseParallel",
    "torch.distributed.tensor.parallel.PrepareModuleInput", "torch.onnx.enable_fake_mode",
    "torch.onnx.ONNXProgram.model_proto", "torch.onnx.OnnxExporterError", "torch.fx.GraphModule.code",
    "torch.fx.GraphModule.graph", "torch.fx.Graph.nodes", "torch.fx.Node.all_input_nodes",
    "torch.fx.Node.args", "torch.fx.Node.kwargs", "torch.fx.Node.next", "torch.fx.Node.prev",
    "torch.fx.Node.stack_trace", "torch.Tensor.sspaddmm", "torch.Tensor.chalf", "torch.Tensor.int_repr",
    "torch.Tensor.is_shared", "torch.Tensor.smm", "torch.Tensor.mode", "torch.Tensor.qscheme",
    "torch.Tensor.share_memory_", "torch.Tensor.sparse_mask", "torch.Tensor.to_mkldnn",
    "torch.Tensor.to_dense", "torch.Tensor.to_sparse", "torch.Tensor.to_sparse_csr",
    "torch.Tensor.to_sparse_csc", "torch.Tensor.to_sparse_bsr", "torch.Tensor.to_sparse_bsc",
    "torch.Tensor.unique_consecutive", "to_sparse", "torch.autograd.profiler.emit_nvtx",
    "torch.autograd.profiler.emit_itt", "torch.autograd.profiler.load_nvprof",
    "torch.nn.functional.avg_pool3d", "torch.nn.functional.max_pool1d", "torch.nn.functional.max_unpool3d",
    "torch.nn.functional.adaptive_max_pool1d", "torch.nn.functional.adaptive_max_pool2d",
    "torch.nn.functional.gumbel_softmax", "torch.nn.functional.embedding_bag", "torch.nn.functional.pdist",
    "torch.nn.functional.multilabel_soft_margin_loss", "torch.nn.functional.triplet_margin_loss",
    "torch.nn.functional.triplet_margin_with_distance_loss", "torch.nn.parallel.data_parallel",
    "torch.nn.Module.ipu", "torch.nn.Module.share_memory", "torch.nn.Module.xpu",
    "torch.nn.modules.module.register_module_full_backward_pre_hook",
    "torch.nn.modules.module.register_module_buffer_registration_hook",
    "torch.nn.modules.module.register_module_module_registration_hook",
    "torch.nn.modules.module.register_module_parameter_registration_hook", "torch.nn.MaxPool1d",
    "torch.nn.MaxPool3d", "torch.nn.MaxUnpool3d", "torch.nn.AvgPool3d", "torch.nn.AdaptiveMaxPool1d",
    "torch.nn.AdaptiveMaxPool2d", "torch.nn.ReflectionPad3d", "torch.nn.ReplicationPad3d", "torch.nn.RReLU",
    "torch.nn.AdaptiveLogSoftmaxWithLoss", "torch.nn.AdaptiveLogSoftmaxWithLoss.log_prob",
    "torch.nn.AdaptiveLogSoftmaxWithLoss.predict", "torch.nn.RNNBase", "torch.nn.RNNBase.flatten_parameters",
    "torch.nn.RNN", "torch.nn.GRU", "torch.nn.RNNCell", "torch.nn.Transformer", "torch.nn.TransformerEncoder",
    "torch.nn.TransformerDecoder", "torch.nn.TransformerDecoder.forward",
    "torch.nn.TransformerEncoderLayer.forward", "torch.nn.TransformerDecoderLayer.forward",
    "torch.nn.LazyLinear.cls_to_become", "torch.nn.MultiLabelMarginLoss", "torch.nn.CosineEmbeddingLoss",
    "torch.nn.DataParallel", "torch.nn.utils.clip_grad_norm", "torch.nn.utils.rnn.PackedSequence.is_cuda",
    "torch.nn.utils.rnn.pack_padded_sequence", "torch.nn.utils.rnn.pad_packed_sequence",
    "torch.nn.utils.rnn.pack_sequence", "torch.nn.utils.rnn.unpack_sequence",
    "torch.nn.utils.rnn.unpad_sequence", "torch.cuda.memory_usage", "torch.cuda.comm.scatter",
    "torch.cuda.comm.gather", "torch.TypedStorage.float8_e4m3fn", "torch.TypedStorage.float8_e5m2",
    "torch.TypedStorage.hpu", "torch.TypedStorage.is_cuda", "torch.TypedStorage.is_hpu",
    "torch.TypedStorage.share_memory_", "torch.UntypedStorage.float8_e4m3fn",
    "torch.UntypedStorage.float8_e5m2", "torch.UntypedStorage.from_file", "torch.UntypedStorage.hpu",
    "torch.UntypedStorage.is_cuda", "torch.UntypedStorage.is_hpu", "torch.UntypedStorage.mps",
    "torch.QUInt8Storage", "torch.QUInt8Storage.dtype", "torch.QInt8Storage", "torch.QInt32Storage",
    "torch.QUInt4x2Storage", "torch.QUInt2x4Storage", "torch.sparse_csr_tensor", "torch.sparse_csc_tensor",
    "torch.sparse_bsr_tensor", "torch.sparse_bsc_tensor", "torch.from_dlpack", "torch.quantize_per_tensor",
    "torch.quantize_per_channel", "torch.heaviside", "torch.scatter_reduce", "torch.poisson",
    "torch.nanquantile", "torch.std_mean", "torch.unique_consecutive", "torch.var_mean",
    "torch.is_deterministic_algorithms_warn_only_enabled", "torch.linalg.ldl_factor",
    "torch.ao.nn.intrinsic.LinearReLU", "torch.ao.nn.intrinsic.qat.LinearReLU",
    "torch.ao.nn.intrinsic.qat.ConvBn1d", "torch.ao.nn.intrinsic.qat.ConvBnReLU1d",
    "torch.ao.nn.intrinsic.qat.ConvBnReLU2d", "torch.ao.nn.qat.Linear", "torch.ao.nn.quantizable.LSTM",
    "torch.ao.nn.quantized.dynamic.Linear", "torch.ao.ns.fx.utils.compute_sqnr",
    "torch.jit.ScriptModule.add_module", "torch.jit.ScriptModule.bfloat16", "torch.jit.ScriptModule.code",
    "torch.jit.ScriptModule.code_with_constants", "torch.jit.ScriptModule.compile",
    "torch.jit.ScriptModule.get_extra_state", "torch.jit.ScriptModule.graph",
    "torch.jit.ScriptModule.inlined_graph", "torch.jit.ScriptModule.register_buffer",
    "torch.jit.ScriptModule.register_module", "torch.jit.ScriptModule.register_parameter",
    "torch.jit.ScriptModule.set_extra_state", "torch.jit.ScriptModule.share_memory",
    "torch.jit.Attribute.type", "torch.jit.Attribute.value", "torch.export.export", "torch.export.save",
    "torch.export.load", "torch.export.ExportedProgram", "torch.export.ExportedProgram.module",
    "torch.export.ExportGraphSignature", "torch.export.ModuleCallSignature", "torch.export.ModuleCallEntry",
    "torch.func.vmap", "torch.func.vjp", "torch.func.jvp", "torch.func.jacrev", "torch.func.jacfwd",
    "torch.func.hessian", "torch.func.functionalize", "torch.func.replace_all_batch_norm_modules_",
    "torch.compiler.compile", "torch.compiler.reset", "torch.compiler.allow_in_graph",
    "torch.compiler.assume_constant_result", "torch.compiler.list_backends", "torch.compiler.disable",
    "torch.fft.ihfft2", "torch.fft.ihfftn", "torch.fft.fftfreq", "torch.fft.rfftfreq", "torch.fft.fftshift",
    "torch.fft.ifftshift", "torch.backends.cuda.preferred_linalg_library",
    "torch.backends.cuda.flash_sdp_enabled", "torch.backends.cuda.enable_mem_efficient_sdp",
    "torch.backends.cuda.mem_efficient_sdp_enabled", "torch.backends.cuda.enable_flash_sdp",
    "torch.backends.cuda.math_sdp_enabled", "torch.backends.cuda.enable_math_sdp",
    "torch.backends.cuda.sdp_kernel", "torch.backends.cudnn.benchmark_limit",
    "torch.backends.opt_einsum.enabled", "torch.backends.opt_einsum.strategy",
    "torch.profiler._KinetoProfile.events", "torch.profiler._KinetoProfile.key_averages",
    "torch.profiler.itt.is_available", "torch.profiler.itt.mark", "torch.profiler.itt.range_push",
    "torch.profiler.itt.range_pop", "torch.nested.to_padded_tensor", "torch.nested.nested_tensor_from_jagged",
    "torch.nested.masked_select", "torch.nested.narrow",
]

# Left out on purpose (see the comment at the top of rules/findings_unsupported_api.toml).
INSTANCE_MEMBERS = (
    "torch.optim.", "torch.fx.", "torch.jit.ScriptModule.", "torch.jit.Attribute.", "torch.profiler._KinetoProfile.",
    "torch.onnx.ONNXProgram.model_proto", "torch.export.ExportedProgram.module",
    "torch.distributed.elastic.rendezvous.etcd_rendezvous_backend.EtcdRendezvousBackend.",
    "torch.distributed.elastic.rendezvous.etcd_store.EtcdStore.", "torch.distributed.optim.DistributedOptimizer.step",
    "torch.distributed.fsdp.FullyShardedDataParallel.module", "torch.nn.AdaptiveLogSoftmaxWithLoss.",
    "torch.nn.RNNBase.flatten_parameters", "torch.nn.TransformerDecoder.forward",
    "torch.nn.TransformerEncoderLayer.forward", "torch.nn.TransformerDecoderLayer.forward",
    "torch.nn.LazyLinear.cls_to_become", "torch.QUInt8Storage.dtype",
)
# `torch.sparse.check_sparse_tensor_invariants.enable()` is reported once, as its class.
COVERED_BY_CLASS = (
    "torch.sparse.check_sparse_tensor_invariants.disable", "torch.sparse.check_sparse_tensor_invariants.enable",
    "torch.sparse.check_sparse_tensor_invariants.is_enabled",
)
REWRITTEN = ("torch.TypedStorage.is_cuda", "torch.UntypedStorage.is_cuda", "torch.nn.utils.rnn.PackedSequence.is_cuda")
SPECIFIC = {
    "torch.cuda.memory_usage": "NPU301",
    "torch.cuda.comm.scatter": "NPU301",
    "torch.cuda.comm.gather": "NPU301",
    "torch.nn.DataParallel": "NPU305",
    "torch.nn.parallel.data_parallel": "NPU305",
    "torch.utils.cpp_extension.load": "NPU302",
    "torch.backends.cudnn.benchmark_limit": "NPU401",
}


def _matched_names():
    names = set()
    for rule in RULES.rules:
        if match_kind_of(rule) in ("api", "call"):
            names.update(names_of(rule))
    return names


def _method_names():
    return {p for r in RULES.findings.get("method", ()) for p in names_of(r)}


def test_the_list_has_240_distinct_names():
    assert len(APPENDIX_C) == len(set(APPENDIX_C)) == 240


def test_every_name_is_matched_or_left_out_with_a_reason():
    matched, methods = _matched_names(), _method_names()
    unaccounted = []
    for name in APPENDIX_C:
        if name in matched or name in SPECIFIC or name in REWRITTEN or name in COVERED_BY_CLASS:
            continue
        if name.startswith(INSTANCE_MEMBERS):
            continue
        if name == "to_sparse" and "to_sparse" in methods:
            continue
        unaccounted.append(name)
    assert unaccounted == []


def test_names_left_out_are_really_not_in_the_npu304_rules():
    npu304 = {n for r in RULES.by_code("NPU304") for n in names_of(r)}
    left_out = [n for n in APPENDIX_C if n.startswith(INSTANCE_MEMBERS) or n in SPECIFIC or n in REWRITTEN]
    assert not npu304 & set(left_out)
    # ... and the NPU304 rules hold nothing that is not on the list (besides method spellings).
    assert {n for n in npu304 if "." in n} <= set(APPENDIX_C)


def test_specific_rules_cover_their_names():
    for name, code in SPECIFIC.items():
        if name == "torch.utils.cpp_extension.load":
            source = "import torch.utils.cpp_extension\nm = torch.utils.cpp_extension.load('m', ['k.cu'])\n"
        elif name == "torch.backends.cudnn.benchmark_limit":
            source = "import torch\ntorch.backends.cudnn.benchmark_limit = 10\n"
        else:
            source = f"import torch\ny = {name}(x)\n"
        result = migrate_source(source, "t.py", rules=RULES)
        assert code in {f.code for f in result.findings}, name
        assert "NPU304" not in {f.code for f in result.findings}, name


def test_every_listed_function_is_reported_when_called():
    """Each name an NPU304 `api` rule holds is flagged (at the reference) when written out in full."""
    for rule in RULES.by_code("NPU304"):
        if match_kind_of(rule) != "api":
            continue
        for name in FindingSpec.of(rule).patterns:
            result = migrate_source(f"import torch\nv = {name}\n", "t.py", rules=RULES)
            assert [(f.code, f.span.line, f.span.col, f.api) for f in result.findings] == [
                ("NPU304", 2, 5, name)
            ], name
