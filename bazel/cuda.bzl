"""CUDA leaf targets, built only under --config=cuda (`//third_party:cuda_enabled`)."""

CUDA_COMPATIBLE = select({
    "//third_party:cuda_enabled": [],
    "//conditions:default": ["//third_party:cuda_never"],
})

def cuda_object(name, src, hdrs = [], arch = "sm_90"):
    """Compiles one .cu file with /usr/local/cuda/bin/nvcc into `<name>.o`."""
    native.genrule(
        name = name,
        srcs = [src] + hdrs,
        outs = [name + ".o"],
        cmd = ("/usr/local/cuda/bin/nvcc -std=c++20 -O2 -Xcompiler -fPIC " +
               "-gencode arch=compute_%s,code=%s " % (arch[3:], arch) +
               "-I. -I/usr/local/cuda/include -c $(location %s) -o $@" % src),
        target_compatible_with = CUDA_COMPATIBLE,
        message = "nvcc %s" % src,
    )
