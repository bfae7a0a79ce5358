"""The six benchmark networks of eshratifar2018 (Table 4), built as their original papers describe them.

Eshratifar & Pedram, "Energy and Performance Efficient Computation Offloading for Deep Neural Networks in a Mobile
Cloud Computing Environment" (GLSVLSI 2018) schedule six networks between a phone and the cloud: four
discriminative ones (AlexNet, OverFeat, VGG16, NiN), a generative one (the Chair generator) and an autoencoder-like
one (Pix2Pix). No model zoo ships most of them, so they are built here from their papers, with random weights, in
eval mode; nothing is downloaded.

Table 4 of eshratifar2018 gives each network's number of layers, counting convolution, deconvolution, pooling,
fully connected and activation layers (softmax included; batch norm, dropout and concatenation not). Each
builder's docstring says how its modules map onto that count. The classifiers here end with logits: the final
softmax that the table counts is left out, as torchvision does.
"""

from __future__ import annotations

import functools
import itertools
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from edgeplan.errors import InvalidInputError

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = [
    "PAPER_MODELS",
    "build_alexnet",
    "build_chair",
    "build_nin",
    "build_overfeat",
    "build_paper_model",
    "build_pix2pix",
    "build_vgg16",
]

InputShapes = tuple[tuple[int, ...], ...]

PAPER_MODELS: dict[str, str] = {
    "alexnet": "AlexNet, 2012 single-model form with LRN and overlapping max pooling, 227x227 "
    "(Krizhevsky et al., NIPS 2012)",
    "overfeat": "OverFeat 'fast' model, 231x231 (Sermanet et al., ICLR 2014)",
    "vgg16": "VGG16, configuration D, 224x224 (Simonyan & Zisserman, ICLR 2015)",
    "nin": "Network in Network, ImageNet model: 4 mlpconv blocks, global average pooling, 224x224 "
    "(Lin et al., ICLR 2014)",
    "chair": "Chair generator: class 809 + view 4 + transform 12 -> 128x128 RGB image and segmentation mask "
    "(Dosovitskiy et al., CVPR 2015)",
    "pix2pix": "Pix2Pix U-Net 256 generator, 256x256x3 -> 256x256x3 (Isola et al., CVPR 2017)",
}
"""Lower-case model name -> one-line description with citation."""


def build_paper_model(name: str) -> tuple[torch.nn.Module, InputShapes]:
    """Build one of the eshratifar2018 benchmark networks by name.

    Parameters
    ----------
    name
        One of the keys of :data:`PAPER_MODELS` (case-insensitive): ``alexnet``, ``overfeat``, ``vgg16``,
        ``nin``, ``chair``, ``pix2pix``.

    Returns
    -------
    module, input_shapes
        The network with random weights, in eval mode, and the shapes of its example inputs (batch 1), one per
        input of ``forward``.

    Raises
    ------
    InvalidInputError
        If ``name`` is not a known model.
    """
    builders: dict[str, Callable[[], tuple[torch.nn.Module, InputShapes]]] = {
        "alexnet": build_alexnet,
        "overfeat": build_overfeat,
        "vgg16": build_vgg16,
        "nin": build_nin,
        "chair": build_chair,
        "pix2pix": build_pix2pix,
    }
    builder = builders.get(name.lower()) if isinstance(name, str) else None
    if builder is None:
        raise InvalidInputError(f"unknown paper model {name!r}; use one of: {', '.join(PAPER_MODELS)}")
    return builder()


def build_alexnet() -> tuple[torch.nn.Module, InputShapes]:
    """AlexNet as in Krizhevsky, Sutskever & Hinton, "ImageNet Classification with Deep Convolutional Neural
    Networks", NIPS 2012 (Fig. 2 and Sec. 3).

    Five conv layers (96 11x11/4, 256 5x5, 384 3x3, 384 3x3, 256 3x3) and three FC layers (4096, 4096, 1000);
    ReLU after every conv and FC layer but the last; local response normalisation after conv1 and conv2;
    overlapping max pooling (3x3, stride 2) after both normalisations and after conv5; dropout 0.5 in the first
    two FC layers. Input 227x227, which gives the paper's 55x55 first-layer maps (the paper's "224" does not).
    60,965,224 parameters (the paper: "60 million"). Table 4 of eshratifar2018 counts 21 layers: 5 conv +
    7 ReLU + 2 LRN + 3 pool + 3 FC + softmax; this module has all of them but the softmax.

    Deviations: the two GPU towers are merged into one model, and the paper's restricted connectivity of conv2,
    conv4 and conv5 (each GPU's kernels see only the maps on the same GPU) is kept as ``groups=2``, as in Caffe's
    reference ``bvlc_alexnet``. PyTorch's ``LocalResponseNorm`` divides ``alpha`` by the window size, so the
    paper's k=2, n=5, alpha=1e-4, beta=0.75 is written ``LocalResponseNorm(5, alpha=5e-4, beta=0.75, k=2)``.
    """
    from torch import nn

    def lrn() -> nn.Module:
        return nn.LocalResponseNorm(5, alpha=5e-4, beta=0.75, k=2.0)

    layers: list[tuple[str, nn.Module]] = [
        ("conv1", nn.Conv2d(3, 96, 11, stride=4)),
        ("relu1", nn.ReLU(inplace=True)),
        ("norm1", lrn()),
        ("pool1", nn.MaxPool2d(3, stride=2)),
        ("conv2", nn.Conv2d(96, 256, 5, padding=2, groups=2)),
        ("relu2", nn.ReLU(inplace=True)),
        ("norm2", lrn()),
        ("pool2", nn.MaxPool2d(3, stride=2)),
        ("conv3", nn.Conv2d(256, 384, 3, padding=1)),
        ("relu3", nn.ReLU(inplace=True)),
        ("conv4", nn.Conv2d(384, 384, 3, padding=1, groups=2)),
        ("relu4", nn.ReLU(inplace=True)),
        ("conv5", nn.Conv2d(384, 256, 3, padding=1, groups=2)),
        ("relu5", nn.ReLU(inplace=True)),
        ("pool5", nn.MaxPool2d(3, stride=2)),
        ("flatten", nn.Flatten(1)),
        *_classifier(256 * 6 * 6, 4096, 4096, 1000, first=6),
    ]
    return _sequential(layers), ((1, 3, 227, 227),)


def build_overfeat() -> tuple[torch.nn.Module, InputShapes]:
    """The "fast" OverFeat model of Sermanet et al., "OverFeat: Integrated Recognition, Localization and Detection
    using Convolutional Networks", ICLR 2014 (Table 1).

    conv1 96 11x11/4 + 2x2/2 max pool, conv2 256 5x5 + 2x2/2 max pool, conv3 512 3x3 (pad 1), conv4 1024 3x3
    (pad 1), conv5 1024 3x3 (pad 1) + 2x2/2 max pool, FC 3072, FC 4096, FC 1000; ReLU after every layer but the
    last, dropout 0.5 on the 6th and 7th layers, no normalisation. Input 231x231; the spatial sizes are the
    table's (56, 28, 24, 12, 12, 12, 6). 145,920,872 parameters and 2.80 G multiply-accumulates. Table 4 of
    eshratifar2018 counts 14 layers for OverFeat, which this layer list does not reproduce under the convention
    that gives the other models' counts (that convention gives 19: 5 conv + 7 ReLU + 3 pool + 3 FC + softmax).

    Deviation: the paper implements layers 6-8 as convolutions to slide the classifier over larger images; on the
    231x231 input they see a single 6x6 window, where a linear layer computes the same thing.
    """
    from torch import nn

    layers: list[tuple[str, nn.Module]] = [
        ("conv1", nn.Conv2d(3, 96, 11, stride=4)),
        ("relu1", nn.ReLU(inplace=True)),
        ("pool1", nn.MaxPool2d(2, stride=2)),
        ("conv2", nn.Conv2d(96, 256, 5)),
        ("relu2", nn.ReLU(inplace=True)),
        ("pool2", nn.MaxPool2d(2, stride=2)),
        ("conv3", nn.Conv2d(256, 512, 3, padding=1)),
        ("relu3", nn.ReLU(inplace=True)),
        ("conv4", nn.Conv2d(512, 1024, 3, padding=1)),
        ("relu4", nn.ReLU(inplace=True)),
        ("conv5", nn.Conv2d(1024, 1024, 3, padding=1)),
        ("relu5", nn.ReLU(inplace=True)),
        ("pool5", nn.MaxPool2d(2, stride=2)),
        ("flatten", nn.Flatten(1)),
        *_classifier(1024 * 6 * 6, 3072, 4096, 1000, first=6),
    ]
    return _sequential(layers), ((1, 3, 231, 231),)


def build_vgg16() -> tuple[torch.nn.Module, InputShapes]:
    """VGG16, configuration D of Simonyan & Zisserman, "Very Deep Convolutional Networks for Large-Scale Image
    Recognition", ICLR 2015 (Table 1).

    Thirteen 3x3 conv layers (pad 1) in five stages of 64, 128, 256, 512, 512 channels, each stage closed by a
    2x2/2 max pool; FC 4096, FC 4096, FC 1000; ReLU after every layer but the last; dropout 0.5 in the first two
    FC layers. Input 224x224. 138,357,544 parameters (the paper: 138 M). Table 4 of eshratifar2018 counts 37
    layers: 13 conv + 15 ReLU + 5 pool + 3 FC + softmax; all but the softmax are here. No deviation (unlike
    torchvision's ``vgg16`` there is no adaptive average pool before the classifier; at 224x224 it is the
    identity).
    """
    from torch import nn

    stages = ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3))
    layers: list[tuple[str, nn.Module]] = []
    in_channels = 3
    for stage, (channels, depth) in enumerate(stages, start=1):
        for index in range(1, depth + 1):
            layers.append((f"conv{stage}_{index}", nn.Conv2d(in_channels, channels, 3, padding=1)))
            layers.append((f"relu{stage}_{index}", nn.ReLU(inplace=True)))
            in_channels = channels
        layers.append((f"pool{stage}", nn.MaxPool2d(2, stride=2)))
    layers.append(("flatten", nn.Flatten(1)))
    layers.extend(_classifier(512 * 7 * 7, 4096, 4096, 1000, first=6))
    return _sequential(layers), ((1, 3, 224, 224),)


def build_nin() -> tuple[torch.nn.Module, InputShapes]:
    """The ImageNet Network in Network of Lin, Chen & Yan, "Network In Network", ICLR 2014.

    The paper describes the mlpconv block (a conv followed by 1x1 convs, "cccp") and global average pooling but
    gives its layer sizes for CIFAR/SVHN/MNIST only; the ImageNet model is the authors' Caffe model-zoo release
    (NIN-Imagenet): four mlpconv blocks, conv1 96 11x11/4 + cccp 96 + cccp 96, conv2 256 5x5 (pad 2) + cccp 256
    + cccp 256, conv3 384 3x3 (pad 1) + cccp 384 + cccp 384, conv4 1024 3x3 (pad 1) + cccp 1024 + cccp 1000;
    ReLU after every conv; 3x3/2 max pooling after the first three blocks; dropout 0.5 before the last block;
    global average pooling of the 6x6x1000 map. Input 224x224. Caffe rounds pooled sizes up, so the pools use
    ``ceil_mode=True`` (54 -> 27 -> 13 -> 6). Table 4 of eshratifar2018 counts 29 layers: 12 conv + 12 ReLU +
    4 pool + softmax; all but the softmax are here.
    """
    from torch import nn

    blocks = ((96, 11, 4, 0, 96, 96), (256, 5, 1, 2, 256, 256), (384, 3, 1, 1, 384, 384), (1024, 3, 1, 1, 1024, 1000))
    layers: list[tuple[str, nn.Module]] = []
    in_channels = 3
    for block, (channels, kernel, stride, pad, cccp_a, cccp_b) in enumerate(blocks, start=1):
        if block == len(blocks):
            layers.append(("drop3", nn.Dropout(0.5)))
        layers.append((f"conv{block}", nn.Conv2d(in_channels, channels, kernel, stride=stride, padding=pad)))
        layers.append((f"relu{block}", nn.ReLU(inplace=True)))
        layers.append((f"cccp{2 * block - 1}", nn.Conv2d(channels, cccp_a, 1)))
        layers.append((f"relu_cccp{2 * block - 1}", nn.ReLU(inplace=True)))
        layers.append((f"cccp{2 * block}", nn.Conv2d(cccp_a, cccp_b, 1)))
        layers.append((f"relu_cccp{2 * block}", nn.ReLU(inplace=True)))
        if block < len(blocks):
            layers.append((f"pool{block}", nn.MaxPool2d(3, stride=2, ceil_mode=True)))
        in_channels = cccp_b
    layers.append(("pool4", nn.AdaptiveAvgPool2d(1)))
    layers.append(("flatten", nn.Flatten(1)))
    return _sequential(layers), ((1, 3, 224, 224),)


def build_chair() -> tuple[torch.nn.Module, InputShapes]:
    """The 128x128 chair generator of Dosovitskiy, Springenberg & Brox, "Learning to Generate Chairs with
    Convolutional Neural Networks", CVPR 2015 (Fig. 2; eshratifar2018 cites the journal version, arXiv:1411.5928).

    Three inputs: the chair style as a one-hot class vector (809), the view (4: sine and cosine of azimuth and
    elevation) and the transformation parameters (12). Each input goes through two FC layers of 512 units (FC-1,
    FC-2); the three results are concatenated (1536) and go through FC-3 and FC-4 (1024 units each). The network
    then splits into two streams, one for the RGB image and one for the segmentation mask: FC-5 (16384 units,
    reshaped to 256x8x8), then four "unpooling + 5x5 convolution" layers uconv-1..4 doubling the size each time
    (8 -> 16 -> 32 -> 64 -> 128) with 256, 92, 48 and 3 (RGB) or 1 (mask) channels. Leaky ReLU follows every
    layer but the outputs, which are linear. ``forward(class_onehot, view, transform)`` returns ``(rgb, mask)``
    of shapes (1, 3, 128, 128) and (1, 1, 128, 128).

    Each uconv (2x2 unpooling that puts each value in the top-left corner of a zero 2x2 block, then a 5x5
    convolution with padding 2) is written as one ``ConvTranspose2d(k=5, stride=2, padding=2, output_padding=1)``,
    which computes the same function with the kernel flipped and transposed. Three details could not be checked
    against the paper's text and are choices: the uconv widths 256, 92, 48 (Fig. 2 as we recall it), the mask
    stream's widths (taken equal to the RGB stream's) and the leaky ReLU slope (0.2).

    Table 4 of eshratifar2018 counts 10 layers for this network, which matches its 10 linear layers (3 FC-1,
    3 FC-2, FC-3, FC-4, 2 FC-5) but leaves out the uconv layers and activations, so the count's convention is
    unclear.
    """
    return _torch_layers().chair(), ((1, 809), (1, 4), (1, 12))


def build_pix2pix() -> tuple[torch.nn.Module, InputShapes]:
    """The U-Net 256 generator of Isola, Zhu, Zhou & Efros, "Image-to-Image Translation with Conditional
    Adversarial Networks", CVPR 2017 (Sec. 6.1.1) and its original Torch code (``defineG_unet``).

    Encoder C64-C128-C256-C512-C512-C512-C512-C512: 4x4 convolutions of stride 2 (256 -> 1), BatchNorm on all but
    the first and the innermost (bottleneck) layer, LeakyReLU(0.2). Decoder: eight 4x4 transposed convolutions of
    stride 2 (1 -> 256) with 512, 512, 512, 512, 256, 128, 64, 3 filters, each preceded by a ReLU; BatchNorm on
    all but the last; dropout 0.5 on the first three; the output of decoder layer ``i`` is concatenated with
    encoder layer ``8 - i`` (so the decoder's inputs have 512, 1024, 1024, 1024, 1024, 512, 256, 128 channels, the
    paper's CD512-CD1024-CD1024-C1024-C1024-C512-C256-C128); Tanh on the output. Convolutions have biases, as in
    the original Torch code (the later PyTorch port drops the biases before BatchNorm). 54,419,459 parameters.
    Table 4 of eshratifar2018 counts 32 layers: 8 conv + 8 transposed conv + 7 LeakyReLU + 8 ReLU + Tanh, which
    is exactly this module's layers without BatchNorm, dropout and concatenation.

    The original code applies its LeakyReLUs in place, so each skip connection carries the activated encoder
    output; here the LeakyReLU closes each encoder block, which gives the same dataflow without in-place tricks.
    """
    return _torch_layers().pix2pix(), ((1, 3, 256, 256),)


def _classifier(
    in_features: int, hidden1: int, hidden2: int, classes: int, first: int
) -> list[tuple[str, torch.nn.Module]]:
    """Three FC layers ``fc{first}..fc{first+2}`` with ReLU and dropout 0.5 after the first two."""
    from torch import nn

    a, b, c = first, first + 1, first + 2
    return [
        (f"fc{a}", nn.Linear(in_features, hidden1)),
        (f"relu{a}", nn.ReLU(inplace=True)),
        (f"drop{a}", nn.Dropout(0.5)),
        (f"fc{b}", nn.Linear(hidden1, hidden2)),
        (f"relu{b}", nn.ReLU(inplace=True)),
        (f"drop{b}", nn.Dropout(0.5)),
        (f"fc{c}", nn.Linear(hidden2, classes)),
    ]


def _sequential(layers: list[tuple[str, torch.nn.Module]]) -> torch.nn.Module:
    """An ``nn.Sequential`` with named layers, in eval mode."""
    from torch import nn

    return nn.Sequential(OrderedDict(layers)).eval()


class _Layers(NamedTuple):
    """Constructors of the multi-input / skip-connection modules, defined on first use (imports torch)."""

    chair: Callable[[], nn.Module]
    pix2pix: Callable[[], nn.Module]


@functools.cache
def _torch_layers() -> _Layers:
    """Define the torch modules of the Chair generator and the Pix2Pix U-Net."""
    import torch
    from torch import nn

    slope = 0.2

    def mlp(sizes: tuple[int, ...], prefix: str) -> nn.Sequential:
        layers: list[tuple[str, nn.Module]] = []
        for index, (n_in, n_out) in enumerate(itertools.pairwise(sizes), start=1):
            layers.append((f"{prefix}{index}", nn.Linear(n_in, n_out)))
            layers.append((f"{prefix}{index}_lrelu", nn.LeakyReLU(slope)))
        return nn.Sequential(OrderedDict(layers))

    def uconv(c_in: int, c_out: int) -> nn.ConvTranspose2d:
        return nn.ConvTranspose2d(c_in, c_out, 5, stride=2, padding=2, output_padding=1)

    def chair_stream(out_channels: int) -> nn.Sequential:
        layers: list[tuple[str, nn.Module]] = [
            ("fc5", nn.Linear(1024, 256 * 8 * 8)),
            ("fc5_lrelu", nn.LeakyReLU(slope)),
            ("reshape", nn.Unflatten(1, (256, 8, 8))),
        ]
        widths = (256, 256, 92, 48, out_channels)
        for index, (c_in, c_out) in enumerate(itertools.pairwise(widths), start=1):
            layers.append((f"uconv{index}", uconv(c_in, c_out)))
            if index < len(widths) - 1:
                layers.append((f"uconv{index}_lrelu", nn.LeakyReLU(slope)))
        return nn.Sequential(OrderedDict(layers))

    class ChairGenerator(nn.Module):
        """Two-stream chair generator: (class one-hot, view, transform) -> (RGB image, segmentation mask)."""

        def __init__(self) -> None:
            super().__init__()
            self.class_fc = mlp((809, 512, 512), "fc")
            self.view_fc = mlp((4, 512, 512), "fc")
            self.transform_fc = mlp((12, 512, 512), "fc")
            self.shared_fc = nn.Sequential(
                OrderedDict(
                    [
                        ("fc3", nn.Linear(3 * 512, 1024)),
                        ("fc3_lrelu", nn.LeakyReLU(slope)),
                        ("fc4", nn.Linear(1024, 1024)),
                        ("fc4_lrelu", nn.LeakyReLU(slope)),
                    ]
                )
            )
            self.rgb_stream = chair_stream(3)
            self.mask_stream = chair_stream(1)

        def forward(
            self, class_onehot: torch.Tensor, view: torch.Tensor, transform: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor]:
            joint = torch.cat([self.class_fc(class_onehot), self.view_fc(view), self.transform_fc(transform)], dim=1)
            hidden = self.shared_fc(joint)
            return self.rgb_stream(hidden), self.mask_stream(hidden)

    def down(c_in: int, c_out: int, norm: bool, act: bool) -> nn.Sequential:
        layers: list[nn.Module] = [nn.Conv2d(c_in, c_out, 4, stride=2, padding=1)]
        if norm:
            layers.append(nn.BatchNorm2d(c_out))
        if act:
            layers.append(nn.LeakyReLU(slope))
        return nn.Sequential(*layers)

    def up(c_in: int, c_out: int, dropout: bool, last: bool) -> nn.Sequential:
        layers: list[nn.Module] = [nn.ReLU(), nn.ConvTranspose2d(c_in, c_out, 4, stride=2, padding=1)]
        layers.extend([nn.Tanh()] if last else [nn.BatchNorm2d(c_out)])
        if dropout:
            layers.append(nn.Dropout(0.5))
        return nn.Sequential(*layers)

    class UNetGenerator(nn.Module):
        """Pix2Pix U-Net 256: 8 stride-2 conv layers down, 8 stride-2 transposed conv layers up, skips by concat."""

        def __init__(self) -> None:
            super().__init__()
            enc = (3, 64, 128, 256, 512, 512, 512, 512, 512)
            self.encoders = nn.ModuleList(down(enc[i], enc[i + 1], norm=0 < i < 7, act=i < 7) for i in range(8))
            dec_out = (512, 512, 512, 512, 256, 128, 64, 3)
            dec_in = (512, *(2 * c for c in dec_out[:-1]))  # the skip concatenations double the inputs
            self.decoders = nn.ModuleList(up(dec_in[i], dec_out[i], dropout=i < 3, last=i == 7) for i in range(8))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            skips: list[torch.Tensor] = []
            for encoder in self.encoders:
                x = encoder(x)
                skips.append(x)
            skips.pop()  # the bottleneck has no skip
            for decoder in self.decoders[:-1]:
                x = torch.cat([decoder(x), skips.pop()], dim=1)
            return self.decoders[-1](x)

    def chair() -> nn.Module:
        return ChairGenerator().eval()

    def pix2pix() -> nn.Module:
        return UNetGenerator().eval()

    return _Layers(chair=chair, pix2pix=pix2pix)
