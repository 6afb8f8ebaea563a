"""CUDA build rules. Every CUDA target builds only under --config=cuda.

The gate is `//third_party:cuda_enabled` (--define=cuda=1). Outside it, CUDA targets are
incompatible (skipped by `bazel build //...` and `bazel test //...`), and the deps on
@local_cuda sit behind a select(), so the default build never analyzes or fetches that
repository (Bazel 4.2 still analyzes the deps of incompatible targets).

Device code: `cuda_library` compiles .cu files with /usr/local/cuda/bin/nvcc for a list
of architectures: `archs` on the target, else `--define cuda_archs=90,100,103`, else
sm_90 (H100/H200). Each arch gets SASS; the highest also gets PTX, so a newer GPU can
JIT it. `-lineinfo` is always on (compute-sanitizer and ncu map results to source).
.cu files hold kernels and raw-pointer launchers only (no absl), so nvcc alone can build
them; absl::Status wrappers live in .cc files of an ordinary cc_library.
"""

CUDA_COMPATIBLE = select({
    "//third_party:cuda_enabled": [],
    "//conditions:default": ["//third_party:cuda_never"],
})

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

def cuda_library(name, srcs, hdrs = [], deps = [], archs = [], copts = [], **kwargs):
    """A cc_library of the objects nvcc makes from `srcs` (.cu), linked with cudart.

    `hdrs` are the launchers' headers (plain C++, no CUDA types needed by includers
    beyond cuda_runtime_api.h). Built only under --config=cuda.
    """
    cuda_object(
        name = name + "_objs",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps,
        archs = archs,
        copts = copts,
        target_compatible_with = CUDA_COMPATIBLE,
        visibility = ["//visibility:private"],
    )
    native.cc_library(
        name = name,
        srcs = [":" + name + "_objs"],
        hdrs = hdrs,
        deps = deps + ["//third_party:cudart"],
        target_compatible_with = CUDA_COMPATIBLE,
        **kwargs
    )

def cuda_system_library(name, actual, visibility = None):
    """`actual` (an @local_cuda library) under --config=cuda; else an incompatible stub.

    An alias, so that includers depend on `actual` directly (layering_check); the select
    keeps @local_cuda out of the default build's analysis.
    """
    native.alias(
        name = name,
        actual = select({
            "//third_party:cuda_enabled": actual,
            "//conditions:default": "//third_party:cuda_unavailable",
        }),
        visibility = visibility,
    )
