"""The model zoo the profiler trains: the A100 table's models, at full size or tiny for CPU tests.

Each workload is a real PyTorch training step (forward, loss, backward, optimizer step) on synthetic
inputs of the dataset's shape -- no downloads. ``full`` is the published architecture at its usual
input size; ``tiny`` keeps the architecture family (bottleneck ResNet, VGG conv stacks, DCGAN's
generator/discriminator game, PointNet's shared MLP + max-pool, a causal transformer) at a width and
input size that train in milliseconds on a CPU. GPT-style jobs take a layer count; their batch is
written ``global/micro`` like the A100 table's LLMs and a step accumulates ``global/micro``
micro-batches.

torch is imported lazily so the package imports without it (it is the ``torch`` extra).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..model import InputError

if TYPE_CHECKING:
    import torch

SIZES = ("tiny", "full")


@dataclass(frozen=True, slots=True)
class ZooModel:
    """What the profile calls a zoo entry: canonical model name and dataset column."""

    zoo_id: str
    dataset: str
    llm: bool = False


ZOO = {
    "resnet50": ZooModel("resnet50", "ImageNet"),
    "vgg19": ZooModel("vgg19", "ImageNet"),
    "dcgan": ZooModel("DCGAN", "LSUN"),
    "pointnet": ZooModel("PointNet", "ShapeNet"),
    "gpt": ZooModel("GPT", "WikiText", llm=True),
}


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job of a profiling run, as plain data (it crosses a process boundary)."""

    model: str  # zoo id: resnet50 | vgg19 | dcgan | pointnet | gpt
    batch: str  # "32"; GPT: "global/micro" or "global"
    size: str = "tiny"
    gpt_layers: int = 4  # GPT only (0 for the other models, so equal jobs compare equal)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.model != "gpt" and self.gpt_layers:
            object.__setattr__(self, "gpt_layers", 0)

    @property
    def profile_model(self) -> str:
        return f"GPT-{self.gpt_layers}L" if self.model == "gpt" else ZOO[self.model].zoo_id

    @property
    def profile_batch(self) -> str:
        if self.model != "gpt":
            return str(int(self.batch))
        g, m = gpt_batch(self.batch)
        return f"{g}/{m}"

    @property
    def strategy(self) -> str | None:
        """Alone on one device an LLM is its own data-parallel replica: ``DP<layers>``."""
        return f"DP{self.gpt_layers}" if self.model == "gpt" else None

    @property
    def label(self) -> str:
        return f"{self.profile_model}/{self.profile_batch}"


def gpt_batch(text: str) -> tuple[int, int]:
    parts = str(text).split("/")
    try:
        g = int(parts[0])
        m = int(parts[1]) if len(parts) > 1 else g
    except (ValueError, IndexError):
        raise InputError(f"GPT batch must be GLOBAL or GLOBAL/MICRO, got {text!r}") from None
    if g <= 0 or m <= 0 or g % m:
        raise InputError(f"GPT batch {text!r}: global must be a positive multiple of micro")
    return g, m


def check_spec(spec: JobSpec) -> None:
    if spec.model not in ZOO:
        raise InputError(f"unknown zoo model {spec.model!r}; known: {', '.join(ZOO)}")
    if spec.size not in SIZES:
        raise InputError(f"unknown model size {spec.size!r}; known: {', '.join(SIZES)}")
    if spec.model == "gpt":
        gpt_batch(spec.batch)
        if spec.gpt_layers <= 0:
            raise InputError(f"GPT layer count must be positive, got {spec.gpt_layers}")
    else:
        try:
            ok = int(spec.batch) > 0
        except ValueError:
            ok = False
        if not ok:
            raise InputError(f"batch size of {spec.model} must be a positive integer, got {spec.batch!r}")


# ---- architectures (torch imported inside) -----------------------------------------------------

def _resnet50(tiny: bool) -> tuple[Any, tuple[int, ...], int]:
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            cout = width * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                         if stride != 1 or cin != cout else nn.Identity())
            self.act = nn.ReLU(inplace=True)

        def forward(self, x: Any) -> Any:
            return self.act(self.body(x) + self.skip(x))

    base, blocks, image, classes = (8, (1, 1, 1, 1), 32, 10) if tiny else (64, (3, 4, 6, 3), 224, 1000)
    layers: list[Any] = [nn.Conv2d(3, base, 7, 2, 3, bias=False), nn.BatchNorm2d(base), nn.ReLU(inplace=True),
                         nn.MaxPool2d(3, 2, 1)]
    cin = base
    for i, n in enumerate(blocks):
        width = base * 2 ** i
        for j in range(n):
            layers.append(Bottleneck(cin, width, 2 if (j == 0 and i > 0) else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers), (3, image, image), classes


_VGG19 = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M")


def _vgg19(tiny: bool) -> tuple[Any, tuple[int, ...], int]:
    from torch import nn

    div, image, hidden, classes = (16, 32, 64, 10) if tiny else (1, 224, 4096, 1000)
    layers: list[Any] = []
    cin = 3
    for v in _VGG19:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            cout = int(v) // div
            layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True)]
            cin = cout
    side = image // 32
    layers += [nn.Flatten(), nn.Linear(cin * side * side, hidden), nn.ReLU(inplace=True),
               nn.Linear(hidden, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, classes)]
    return nn.Sequential(*layers), (3, image, image), classes


def _pointnet(tiny: bool) -> tuple[Any, tuple[int, ...], int]:
    from torch import nn

    # PointNet's classifier without the input/feature transform nets (T-Nets): shared MLP, max-pool, MLP
    div, points, classes = (8, 128, 10) if tiny else (1, 1024, 40)
    w = [64 // div, 128 // div, 1024 // div, 512 // div, 256 // div]
    model = nn.Sequential(
        nn.Conv1d(3, w[0], 1), nn.BatchNorm1d(w[0]), nn.ReLU(),
        nn.Conv1d(w[0], w[1], 1), nn.BatchNorm1d(w[1]), nn.ReLU(),
        nn.Conv1d(w[1], w[2], 1), nn.BatchNorm1d(w[2]), nn.ReLU(),
        nn.AdaptiveMaxPool1d(1), nn.Flatten(),
        nn.Linear(w[2], w[3]), nn.ReLU(), nn.Linear(w[3], w[4]), nn.ReLU(), nn.Linear(w[4], classes))
    return model, (3, points), classes


def _classifier_step(builder: Callable[[bool], tuple[Any, tuple[int, ...], int]], spec: JobSpec,
                     device: torch.device) -> tuple[Callable[[], None], Any, Any]:
    import torch

    model, shape, classes = builder(spec.size == "tiny")
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    b = int(spec.batch)
    x = torch.randn(b, *shape, device=device)
    y = torch.randint(0, classes, (b,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    return step, model, opt


def _dcgan_step(spec: JobSpec, device: torch.device) -> tuple[Callable[[], None], Any, Any]:
    import torch
    from torch import nn

    tiny = spec.size == "tiny"
    nz, width, image = (16, 4, 16) if tiny else (100, 32, 64)  # full: 512-256-128-64 channels, as DCGAN
    ups = {16: 2, 64: 4}[image]  # number of stride-2 up/down convolutions after the 4x4 seed
    g_layers: list[Any] = [nn.ConvTranspose2d(nz, width * 2 ** ups, 4, 1, 0, bias=False),
                           nn.BatchNorm2d(width * 2 ** ups), nn.ReLU(True)]
    for i in range(ups, 1, -1):
        g_layers += [nn.ConvTranspose2d(width * 2 ** i, width * 2 ** (i - 1), 4, 2, 1, bias=False),
                     nn.BatchNorm2d(width * 2 ** (i - 1)), nn.ReLU(True)]
    g_layers += [nn.ConvTranspose2d(width * 2, 3, 4, 2, 1, bias=False), nn.Tanh()]
    d_layers: list[Any] = [nn.Conv2d(3, width * 2, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True)]
    for i in range(1, ups):
        d_layers += [nn.Conv2d(width * 2 ** i, width * 2 ** (i + 1), 4, 2, 1, bias=False),
                     nn.BatchNorm2d(width * 2 ** (i + 1)), nn.LeakyReLU(0.2, True)]
    d_layers += [nn.Conv2d(width * 2 ** ups, 1, 4, 1, 0, bias=False), nn.Flatten()]
    gen, disc = nn.Sequential(*g_layers).to(device), nn.Sequential(*d_layers).to(device)
    og = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    od = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    b = int(spec.batch)
    real = torch.randn(b, 3, image, image, device=device)
    ones, zeros = torch.ones(b, 1, device=device), torch.zeros(b, 1, device=device)
    bce = nn.BCEWithLogitsLoss()

    def step() -> None:
        fake = gen(torch.randn(b, nz, 1, 1, device=device))
        od.zero_grad(set_to_none=True)
        (bce(disc(real), ones) + bce(disc(fake.detach()), zeros)).backward()
        od.step()
        og.zero_grad(set_to_none=True)
        bce(disc(fake), ones).backward()
        og.step()

    return step, nn.ModuleList([gen, disc]), [og, od]


def _gpt_step(spec: JobSpec, device: torch.device) -> tuple[Callable[[], None], Any, Any]:
    import torch
    from torch import nn

    tiny = spec.size == "tiny"
    d, heads, seq, vocab = (32, 2, 16, 128) if tiny else (1024, 16, 1024, 50257)
    g, m = gpt_batch(spec.batch)

    class Gpt(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.zeros(seq, d))
            layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
            self.blocks = nn.TransformerEncoder(layer, spec.gpt_layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.tok.weight  # tied, as in GPT-2
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

        def forward(self, ids: Any) -> Any:
            h = self.tok(ids) + self.pos
            return self.head(self.norm(self.blocks(h, mask=self.mask, is_causal=True)))

    model = Gpt().to(device)
    model.head.weight = model.tok.weight  # .to() may copy parameters one by one: tie again
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, vocab, (m, seq + 1), device=device)
    loss_fn = nn.CrossEntropyLoss()
    micro_steps = g // m

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        for _ in range(micro_steps):
            logits = model(ids[:, :-1])
            (loss_fn(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1)) / micro_steps).backward()
        opt.step()

    return step, model, opt


def build_step(spec: JobSpec, device: torch.device) -> tuple[Callable[[], None], Any, Any]:
    """(one training step, the module(s), the optimizer(s)) for ``spec`` on ``device``."""
    import torch

    check_spec(spec)
    torch.manual_seed(spec.seed)
    with torch.device(device):  # build in place: no CPU copy of a large model first
        if spec.model == "resnet50":
            return _classifier_step(_resnet50, spec, device)
        if spec.model == "vgg19":
            return _classifier_step(_vgg19, spec, device)
        if spec.model == "pointnet":
            return _classifier_step(_pointnet, spec, device)
        if spec.model == "dcgan":
            return _dcgan_step(spec, device)
        return _gpt_step(spec, device)
