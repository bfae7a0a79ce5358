"""The synthetic NAS space of li2023 (§4.3.2): 9 sampled blocks in sequence, seeded.

Li et al., "Predicting Inference Latency of Neural Architectures on Mobile Devices" (ICPE 2023), build a synthetic
dataset of 1000 networks: a sequence of 9 blocks "following the design of sequential connections of blocks in
MobileNetV2", each block's kind and parameters sampled uniformly among

1. ``conv``: a convolution, kernel 3, 5 or 7, optionally grouped with ``4k`` groups (1 <= k <= 16);
2. ``dwsep``: a depthwise-separable convolution, kernel 3, 5 or 7;
3. ``bottleneck``: a MobileNetV2 linear bottleneck, kernel 3, 5 or 7, expansion 1, 3 or 6, optional
   squeeze-and-excite;
4. ``pool``: average or max pooling, window 1x1 or 3x3;
5. ``split``: a split into 2, 3 or 4 parts, an element-wise operation on each part, and a concatenation;

with output channels C1..C5 uniform in [8, 80], C6..C9 in [80, 400] and a head of C10 in [1200, 1800] channels.
The paper leaves the rest open; the choices made here are:

- Input 224x224x3. Stem: 3x3 conv, stride 2, 32 channels, BN, ReLU6 (the MobileNetV2 stem).
- Block strides ``(1, 2, 2, 1, 2, 1, 2, 1, 1)``: with the stem this downsamples 224 -> 112 -> 56 -> 28 -> 14 -> 7,
  as MobileNetV2 does (its stage strides 1, 2, 2, 2, 1, 2, 1), ending on a 7x7 map.
- Convolutions are followed by BN and ReLU6 (MobileNetV2's activation); the bottleneck's projection is linear (BN,
  no activation) and has a residual connection when its stride is 1 and its input and output channels agree.
- ``conv``: groups are sampled uniformly among ``None`` (dense) and every ``4k`` (1 <= k <= 16) that divides both
  the input and the output channels.
- ``dwsep``: depthwise kxk conv + BN + ReLU6, then pointwise 1x1 conv + BN + ReLU6.
- ``bottleneck``: squeeze-and-excite (Hu et al.) after the depthwise conv, as in MnasNet / MobileNetV3: global
  average pool, 1x1 conv to ``max(8, expanded // 4)`` channels, ReLU, 1x1 conv back, sigmoid, multiply.
- ``pool``: padding ``window // 2``; average pooling excludes the padding (``count_include_pad=False``, TFLite's
  SAME average pool). No BN or activation.
- ``split``: the channels are split into near-equal parts (the first ``C mod s`` parts get one more channel); each
  part gets one element-wise op sampled among ``relu``, ``add`` (the part plus itself) and ``mul`` (the part times
  itself); the parts are concatenated back.
- Pooling and split blocks keep the channel count: the output channels sampled for their position are not used
  (:attr:`SyntheticBlock.out_channels` records the real count). A split block at a stride-2 position starts with a
  1x1 max pool of stride 2 (plain subsampling) so that every architecture ends on the same 7x7 map.
- Head: 1x1 conv to C10 channels + BN + ReLU6, global average pooling, linear layer to 1000 classes.

**The wide space** (``synthetic-wide:SEED``, edgeplan's, not the paper's). li2023 §5.3 trains on its synthetic
networks and tests on real-world ones, and observes the dataset shift this creates: the real-world convolutions are
wider and faster per operation than the synthetic ones. The zoo's CNNs (torchvision, timm) shift further than the
paper's mobile networks: ResNets, VGGs, RegNets and ResNeXts run dense and grouped convolutions of 64-2048 channels
at 7-112 pixels, where li2023's space has at most 80 channels in its first five blocks (down to the first 14x14
one) and at most 400 after. The wide space keeps the paper's structure (stem, the same five block kinds, strides and
head) and samples the widths the zoo uses:

- Channels log-uniform and rounded to a multiple of 8 (the zoo's widths are multiples of 8 almost everywhere; the
  paper's space, uniform over integers, covers the unaligned ones): the stem in [16, 64]; the block at 112x112 in
  [16, 128]; 56x56 in [24, 256]; 28x28 in [32, 512]; 14x14 in [64, 1024]; 7x7 in [128, 1536]; the head in
  [512, 2048].
- Block kinds are drawn with weights conv 3, bottleneck 2, dwsep 1, pool 1, split 1 (the zoo's time goes mostly
  to dense convolutions, then to inverted bottlenecks).
- A ``conv`` block's kernel is 1 or 3 (the dense kernels of the zoo's bodies; 5 and 7 remain in the depthwise
  kernels of ``dwsep`` and ``bottleneck`` blocks, as in EfficientNet and MixNet). It is dense with probability
  1/2, else grouped with ``4k`` groups as in the paper's space (ResNeXt- and RegNet-like grouped convolutions;
  aligned widths admit many group counts, which would otherwise crowd out the dense convolutions).
- A ``bottleneck``'s expansion is 1, 3 or 6 as in the paper, capped so that the expanded width stays at most
  3072.

A wide seed is an independent draw: ``synthetic-wide:5`` shares nothing with ``synthetic:5``.

**The aligned space** (``synthetic-aligned:SEED``, edgeplan's). The wide space's widths are multiples of 8, and
mostly of 8 only; the zoo's are mostly multiples of 32 or 64, and the CPU's convolution kernels, which block
channels by 8 to 64, run those faster. Its grouped convolutions also stop at 64 groups,
where RegNet and ResNeXt run up to hundreds of groups of 4-256 channels. The aligned space is the wide space with

- each width rounded to a multiple of an alignment drawn per width from 16, 32 and 64 (64 with probability 1/2),
  in the same log-uniform ranges;
- a grouped ``conv`` block's group count drawn uniformly among the divisors of the two channel counts' greatest
  common divisor that leave at least 4 channels per group (so group widths from 4 to half the channels).

**The heads space** (``synthetic-heads:SEED``, edgeplan's). Every network of the other spaces ends on a linear
layer to 1000 classes from a global average, so a predictor trained on them has seen fully connected layers of one
output width only, and of at most 2048 inputs: the zoo's VGGs and AlexNet, whose classifiers read the flattened
feature map (9,216 or 25,088 inputs) through two hidden layers of 4,096, are out of its range, and how an FC
layer's time grows with its output width is not identified at all. The heads space is the aligned space's body with
a classifier sampled as well:

- the classifier reads the global average (as in the other spaces) or, with probability 1/2, the flattened 7x7
  map (VGG's and AlexNet's classifiers), whose head conv then has [64, 512] channels (3,136-25,088 inputs);
- 0, 1 or 2 hidden linear layers, each followed by ReLU, of widths in [256, 4096];
- the output layer has 1000 classes with probability 1/2, else a width in [64, 4096];

the widths log-uniform and aligned as the aligned space's. A heads seed draws from its own stream
(``default_rng([seed, 0x68656164])``), so ``synthetic-heads:5`` shares nothing with ``synthetic-aligned:5``.

**The stages space** (``synthetic-stages:SEED``, edgeplan's). Real CNNs are built of stages of identical blocks
(ResNet-50's 3, 4, 6 and 3 bottlenecks, MobileNetV2's 1-4 per stage), so most of a zoo CNN's operations run right
after the same operation, at the same shapes, ran earlier in the forward pass (few do in the other spaces'
networks), and on a CPU such a repeat runs faster than the first of its kind (see
:data:`edgeplan.costmodels.opwise.features.CONTEXT_FEATURES`). A predictor that learns the
repeats' speed from the other spaces sees few of them, at few shapes. The stages space is the aligned space's body
(widths, alignments, kinds, group counts) with stages:

- after a ``conv``, ``dwsep`` or ``bottleneck`` block, 0 to 4 copies of it (uniformly), each at stride 1 with the
  block's output channels as input and output, as the later blocks of a real stage are;
- a ``conv`` or ``dwsep`` copy adds its input to its output (a residual, as ResNet's blocks do); a ``bottleneck``
  copy has the bottleneck's residual, its expansion capped for its input as the first one's is;
- ``pool`` and ``split`` blocks are not repeated;

so a network has 9 to 45 blocks. A stages seed draws from its own stream (``default_rng([seed, 0x73746167])``).

**The modern space** (``synthetic-modern:SEED``, edgeplan's). The zoo's newer CNNs run operations none of the
other spaces has: ConvNeXt's blocks spend most of their time in linear layers over every pixel of a channels-last
map (3136 rows at 56x56), between a LayerNorm and a GELU; EfficientNet, MobileNetV3 and RegNetY activate with SiLU
or hard-swish; ResNets and VGGs with an in-place ReLU over whole maps (the other spaces' in-place ReLUs are their
squeeze-and-excite gates', at 1x1). A predictor that never saw those prices them by their category's other ops and
underpredicts such networks (``benchmarks/bench_li2023_zoo_bias.py --worst`` lists the worst). The modern space is
the stages space with

- one activation per network for every convolution's, drawn uniformly among ReLU6, ReLU, SiLU, hard-swish (all
  in place) and GELU;
- a sixth block kind, ``convnext`` (torchvision's ConvNeXt block), drawn with weight 2 (conv 3, bottleneck 2,
  convnext 2, dwsep 1, pool 1, split 1): at a stride-2 position or a change of width, a downsampling convolution
  (kernel and stride 2, or 1x1) with batch norm first; then a 7x7 depthwise convolution, a permute to channels
  last, a LayerNorm, a linear layer to ``expansion`` (2, 3 or 4, the expanded width at most 3072) times the width,
  GELU, a linear layer back, a permute back, a per-channel scale (layer scale) and the residual; repeated as the
  stages space repeats its blocks, the copies without the downsampling.

**The mixed space** (``synthetic-mixed:SEED``, edgeplan's). A predictor trained on a few networks of one of the
spaces above mispredicts most the zoo's CNNs built of blocks none of those networks has (ConvNeXts, VGG's 2x2 max
pools, DenseNets' many-part concatenations, RegNets; ``benchmarks/bench_li2023_zoo_bias.py``). The mixed space puts
the zoo's block families into every draw, so that few networks cover them all: it is the modern space (activation
per network, aligned widths, stages of 0 to 4 copies) with the heads space's classifiers and

- block kinds drawn with weights conv 2, resnet 2, bottleneck 2, convnext 1, dense 1, dwsep 1, pool 1, split 1;
- ``resnet``: the bottleneck of ResNet-50, ResNeXt and RegNet: 1x1 conv to ``width``, 3x3 conv with the stride
  and groups, optional squeeze-and-excite (RegNetY, probability 1/3), 1x1 conv to the output width; the shortcut a
  1x1 conv with batch norm where the stride or the width changes, added in place, then the activation. ``width`` is
  1/4 (ResNet), 1/2 (ResNeXt) or 1 (RegNet) of the output width, rounded down to a multiple of the group width,
  which is drawn among 8, 16, 24, 32, 48, 64, 128 channels and dense (those not above the width);
- ``dense``: a DenseNet-BC block: ``layers`` layers, each the concatenation of the block's input and every earlier
  layer's output (the first reads the input alone), batch norm, activation, 1x1 conv to 4 x ``growth`` channels,
  batch norm, activation, 3x3 conv to ``growth`` (12, 16, 24, 32 or 48) channels; then the transition: the
  concatenation of all, batch norm, activation, 1x1 conv to the block's width and, at a stride of 2, a 2x2 average
  pool. 2 to 6, 12, 24, 48 or 32 layers on a 112, 56, 28, 14 or 7 pixel input (DenseNet-121 runs 6, 12, 24 and
  16, DenseNet-201 up to 48), and at most 3072 concatenated channels;
- a ``pool`` block at a stride of 2 may also have a 2x2 window (unpadded, VGG's max pool).

**The normalization-free space** (``synthetic-nf:SEED``, edgeplan's). NF-ResNets and NFNets standardize every
convolution's weight at every call (timm's ``ScaledStdConv2d``: a batch norm in training mode over each filter's
fan-in, which eager PyTorch runs on the weight at each forward pass) and have no batch norm after it. No other space
has that operation, and it is a large share of those networks' eager latency; the IR folds it away, as any
computation on constants, and a latency model lists it as unpredicted. The nf space is the mixed space (its own
stream) in which each ``conv``, ``dwsep``, ``bottleneck``, ``convnext`` and ``resnet`` block (and its copies) draws,
after its other parameters, whether its convolutions with batch norm are weight-standardized instead (``std``,
probability 1/2): the convolution, without bias, of the standardized weight (epsilon :data:`STD_EPS`, no gain), then
the activation. The stem, the head and the dense blocks keep their batch norms.

Sampling uses only ``numpy.random.default_rng(seed)`` (the heads, stages, modern, mixed and nf spaces'
``default_rng([seed, 0x68656164])``, ``default_rng([seed, 0x73746167])``, ``default_rng([seed, 0x6d6f6465])``,
``default_rng([seed, 0x6d697864])`` and ``default_rng([seed, 0x6e66726d])``;
``integers``, and ``uniform`` for the edgeplan spaces' widths),
so a seed gives the same architecture on every machine (NumPy does not formally promise stream stability across
versions; a golden-architecture test per space guards it).
:func:`sample_synthetic` does not import torch.

Modules: :mod:`.space` (the vocabulary and the frozen architecture descriptions), :mod:`.sampling` (seed ->
architecture, NumPy only) and :mod:`.build` (architecture -> torch module).
"""

from __future__ import annotations

from edgeplan.frontends.synthetic.build import build_synthetic
from edgeplan.frontends.synthetic.sampling import sample_synthetic
from edgeplan.frontends.synthetic.space import (
    ACTIVATIONS,
    BLOCK_KINDS,
    DENSE_BOTTLENECK,
    ELEMENTWISE_OPS,
    FINAL_MAP,
    INPUT_SIZE,
    NUM_CLASSES,
    SPACES,
    STD_EPS,
    STEM_CHANNELS,
    STRIDES,
    SyntheticArch,
    SyntheticBlock,
    family_of,
    pool_padding,
)

__all__ = [
    "ACTIVATIONS",
    "BLOCK_KINDS",
    "DENSE_BOTTLENECK",
    "ELEMENTWISE_OPS",
    "FINAL_MAP",
    "INPUT_SIZE",
    "NUM_CLASSES",
    "SPACES",
    "STD_EPS",
    "STEM_CHANNELS",
    "STRIDES",
    "SyntheticArch",
    "SyntheticBlock",
    "build_synthetic",
    "family_of",
    "pool_padding",
    "sample_synthetic",
]
