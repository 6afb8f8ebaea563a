"""CUDA build rules. Every CUDA target builds only under --config=cuda or --config=cuda_cpu.

The gates are `//third_party:cuda_enabled` (--define=cuda=1: nvcc, the real CUDA runtime,
cuBLAS and NCCL) and `//third_party:cuda_cpu` (--define=cuda=cpu: the same sources on the
CPU execution layer, //runtime/cuda/cpu; docs/gpu.md). Outside both, CUDA targets are
incompatible (skipped by `bazel build //...` and `bazel test //...`), and the deps on
@local_cuda sit behind a select(), so the default build never analyzes or fetches that
repository (Bazel 4.2 still analyzes the deps of incompatible targets).

Device code: `cuda_library` compiles .cu files with /usr/local/cuda/bin/nvcc for a list
of architectures: `archs` on the target, else `--define cuda_archs=90,100,103`, else
sm_90 (H100/H200). Each arch gets SASS; the highest also gets PTX, so a newer GPU can
JIT it. `-lineinfo` is always on (compute-sanitizer and ncu map results to source).
.cu files hold kernels and raw-pointer launchers only (no absl), so nvcc alone can build
them; absl::Status wrappers live in .cc files of an ordinary cc_library.

Under --config=cuda_cpu, `cuda_library` compiles each .cu as ordinary C++ with the normal
toolchain instead: a generated `<name>_cpu/<file>.cc` includes the kernel prelude of the
CPU execution layer (CUDA_CPU_PRELUDE: the device builtins, `__global__` and friends, the
launch template behind runtime/cuda/kernels/launch.h) and then the .cu itself, and links
//runtime/cuda/cpu:kernel. nvcc is not used, and nothing of the CPU layer reaches nvcc.
"""

# Every CUDA target: built under --config=cuda (a GPU) and --config=cuda_cpu (the CPU
# execution layer), skipped otherwise.
CUDA_COMPATIBLE = select({
    "//third_party:cuda_enabled": [],
    "//third_party:cuda_cpu": [],
    "//conditions:default": ["//third_party:cuda_never"],
})

# Targets that only make sense on a GPU (benchmarks, "gpu_bench"): skipped under
# --config=cuda_cpu, whose timings mean nothing.
CUDA_GPU_ONLY = select({
    "//third_party:cuda_enabled": [],
    "//conditions:default": ["//third_party:cuda_never"],
})

# Targets of the CPU execution layer's build only (--config=cuda_cpu).
CUDA_CPU_ONLY = select({
    "//third_party:cuda_cpu": [],
    "//conditions:default": ["//third_party:cuda_never"],
})

# Targets of the race-checking build only (--config=cuda_cpu_racecheck).
CUDA_CPU_RACECHECK_ONLY = select({
    "//third_party:cuda_cpu_racecheck": [],
    "//conditions:default": ["//third_party:cuda_never"],
})

# The race checker's load/store callbacks (runtime/cuda/cpu/kernel/racecheck.h), added to
# every generated kernel file under --config=cuda_cpu_racecheck.
CUDA_CPU_RACECHECK_COPTS = ["-fsanitize-coverage=edge,trace-loads,trace-stores"]

# The header every .cu includes first when compiled as C++ (//runtime/cuda/cpu:kernel).
CUDA_CPU_PRELUDE = "runtime/cuda/cpu/kernel/prelude.h"

NVCC = "/usr/local/cuda/bin/nvcc"
DEFAULT_CUDA_ARCHS = ["90"]

def _parse_archs(archs, where):
    for arch in archs:
        digits = arch[:-1] if arch.endswith("a") or arch.endswith("f") else arch
        if not digits.isdigit():
            fail("%s: CUDA arch %r is not a number such as 90, 100 or 90a" % (where, arch))
    return archs

def _cuda_object_impl(ctx):
    if ctx.attr.archs:
        archs = _parse_archs(ctx.attr.archs, "archs")
    elif "cuda_archs" in ctx.var:
        archs = _parse_archs(ctx.var["cuda_archs"].split(","), "--define cuda_archs")
    else:
        archs = DEFAULT_CUDA_ARCHS
    gencode = []
    for arch in archs:
        gencode.append("-gencode=arch=compute_%s,code=sm_%s" % (arch, arch))
    gencode.append("-gencode=arch=compute_%s,code=compute_%s" % (archs[-1], archs[-1]))

    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_cuda_objs/%s/%s.o" % (ctx.label.name, src.basename))
        args = ctx.actions.args()
        args.add_all([
            "-std=c++20",
            "-O3",
            "-lineinfo",
            "-Xcompiler=-fPIC,-Wall",
            "--Werror=all-warnings",
            "-I.",
            "-I" + ctx.bin_dir.path,
            "-I/usr/local/cuda/include",
        ])
        args.add_all(gencode)
        args.add_all(ctx.attr.copts)
        args.add_all(["-c", src.path, "-o", obj.path])
        ctx.actions.run(
            executable = NVCC,
            arguments = [args],
            # Headers of `deps` too (e.g. a host/device header of another package).
            inputs = depset(
                [src] + ctx.files.hdrs,
                transitive = [dep[CcInfo].compilation_context.headers for dep in ctx.attr.deps],
            ),
            outputs = [obj],
            mnemonic = "Nvcc",
            progress_message = "nvcc %s (sm_%s)" % (src.short_path, ",".join(archs)),
            # nvcc finds its host compiler (gcc) on PATH.
            use_default_shell_env = True,
        )
        objects.append(obj)
    return [DefaultInfo(files = depset(objects))]

cuda_object = rule(
    implementation = _cuda_object_impl,
    doc = "Compiles each .cu file in `srcs` into one object file with nvcc.",
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"], mandatory = True),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(providers = [CcInfo], doc = "libraries whose headers nvcc reads"),
        "archs": attr.string_list(doc = "e.g. [\"90\", \"100\"]; empty: cuda_archs or sm_90"),
        "copts": attr.string_list(doc = "extra nvcc flags"),
    },
)

def _cuda_cpu_sources_impl(ctx):
    outputs = []
    for src in ctx.files.srcs:
        out = ctx.actions.declare_file("%s/%s.cc" % (ctx.label.name, src.basename))
        ctx.actions.write(out, "".join([
            "// Generated by bazel/cuda.bzl: %s compiled as C++ on the CPU execution\n" %
            src.short_path,
            "// layer (--config=cuda_cpu). The prelude declares the device builtins.\n",
            "#include \"%s\"\n" % CUDA_CPU_PRELUDE,
            "#include \"%s\"\n" % src.short_path,
        ]))
        outputs.append(out)
    return [DefaultInfo(files = depset(outputs))]

_cuda_cpu_sources = rule(
    implementation = _cuda_cpu_sources_impl,
    doc = "One .cc per .cu in `srcs` that includes the CPU layer's prelude, then the .cu.",
    attrs = {"srcs": attr.label_list(allow_files = [".cu"], mandatory = True)},
)

def cuda_library(name, srcs, hdrs = [], deps = [], archs = [], copts = [], **kwargs):
    """A cc_library of the objects nvcc makes from `srcs` (.cu), linked with cudart.

    `hdrs` are the launchers' headers (plain C++, no CUDA types needed by includers
    beyond cuda_runtime_api.h). Built only under --config=cuda, or under
    --config=cuda_cpu as C++ on the CPU execution layer (`archs` and `copts`, which are
    nvcc's, are then unused).
    """
    cuda_object(
        name = name + "_objs",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps,
        archs = archs,
        copts = copts,
        target_compatible_with = CUDA_GPU_ONLY,
        visibility = ["//visibility:private"],
    )
    _cuda_cpu_sources(
        name = name + "_cpu",
        srcs = srcs,
        target_compatible_with = CUDA_CPU_ONLY,
        visibility = ["//visibility:private"],
    )
    native.cc_library(
        name = name,
        srcs = select({
            "//third_party:cuda_cpu": [":" + name + "_cpu"],
            "//conditions:default": [":" + name + "_objs"],
        }),
        hdrs = hdrs,
        textual_hdrs = select({
            "//third_party:cuda_cpu": srcs,
            "//conditions:default": [],
        }),
        # The kernels read bf16 rows through uint4 (16-byte vector) pointers, as CUDA
        # code does: well-defined for nvcc, not for a C++ compiler's aliasing rules.
        # Contraction off: nvcc's FMA contraction is not reproduced anyway (docs/gpu.md).
        # --config=cuda_cpu_racecheck (a specialization of cuda_cpu) also instruments the
        # kernels' loads and stores for the race checker.
        copts = select({
            "//third_party:cuda_cpu_racecheck": [
                "-fno-strict-aliasing",
                "-ffp-contract=off",
            ] + CUDA_CPU_RACECHECK_COPTS,
            "//third_party:cuda_cpu": ["-fno-strict-aliasing", "-ffp-contract=off"],
            "//conditions:default": [],
        }),
        deps = deps + ["//third_party:cudart"] + select({
            "//third_party:cuda_cpu": ["//runtime/cuda/cpu:kernel"],
            "//conditions:default": [],
        }),
        target_compatible_with = CUDA_COMPATIBLE,
        **kwargs
    )

def cuda_system_library(name, actual, cpu_actual, visibility = None):
    """`actual` (an @local_cuda library) under --config=cuda, `cpu_actual` (the CPU
    execution layer's library of the same headers) under --config=cuda_cpu; else an
    incompatible stub.

    An alias, so that includers depend on `actual` directly (layering_check); the select
    keeps @local_cuda out of the default build's analysis.
    """
    native.alias(
        name = name,
        actual = select({
            "//third_party:cuda_enabled": actual,
            "//third_party:cuda_cpu": cpu_actual,
            "//conditions:default": "//third_party:cuda_unavailable",
        }),
        visibility = visibility,
    )
