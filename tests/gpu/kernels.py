"""Small kernels that exercise what the specs do not: scalar parameters, branches, every shuffle,
casts, math functions, unrolling, loop-carried integers, async copies, dynamic shared memory and
odd integer arithmetic. Used by tests/test_lowering.py (lower + ptxas) and by the GPU tests (GPU
against the interpreter). Each entry: name -> (source, consts, list of shapes)."""

SAXPY = """
kernel saxpy(alpha: f32, x: f32[N], y: f32[N]) -> out: f32[N]:
    grid(cdiv(N, 1024))
    block(256)
    base = block_id.x * 1024
    xs = load(x[base : base + 1024], tv=(256, 4):(4, 1), mask=True)
    ys = load(y[base : base + 1024], tv=(256, 4):(4, 1), mask=True)
    store(out[base : base + 1024], xs * alpha + ys, mask=True)
"""

LANES = """
kernel lanes(x: f32[N]) -> (a: f32[N], b: f32[N]):
    grid(cdiv(N, 256))
    block(256)
    base = block_id.x * 256
    v = load(x[base : base + 256], tv=(256, 1):(1, 0), mask=True)
    up = shfl_up(v, 3)
    down = shfl_down(v, 5)
    x1 = shfl_xor(v, 17)
    i0 = shfl_idx(v, lane_id // 2)
    if lane_id % 3 == 0:
        r = up + down
    elif lane_id % 3 == 1:
        r = x1 * 2.0
    else:
        r = i0 - up
    store(a[base : base + 256], r, mask=True)
    store(b[base : base + 256], max(v, x1), mask=True, where=warp_id != 2)
"""

CASTS = """
kernel casts(x: f32[N]) -> (h: bf16[N], y: f32[N]):
    grid(cdiv(N, 512))
    block(128)
    base = block_id.x * 512
    v = load(x[base : base + 512], tv=(128, 4):(4, 1), mask=True)
    hb = cast(v, bf16)
    store(h[base : base + 512], hb, mask=True)
    hf = cast(v, f16)
    w = cast(hf, f32) + sqrt(abs(v)) - exp(v * 0.25) + log2(abs(v) + 1.0)
    acc = zeros(f32[512], tv=(128, 4):(4, 1))
    for i in range(3, unroll=3):
        acc = acc + w * 0.5
    store(y[base : base + 512], acc + recip(abs(v) + 2.0), mask=True)
"""

STAGE2D = """
kernel stage2d(x: f32[M, N]) -> y: f32[M, N]:
    grid(cdiv(N, 64), cdiv(M, 16))
    block(128)
    m0 = block_id.y * 16
    n0 = block_id.x * 64
    s = shared(f32[2, 16, 64])
    copy_async(s[0, 0 : 16, 0 : 64], x[m0 : m0 + 16, n0 : n0 + 64], tv=(128, 8):(8, 1), mask=True, vec=4)
    commit()
    copy_async(s[1, 0 : 16, 0 : 64], x[m0 : m0 + 16, n0 : n0 + 64], tv=(128, 8):(8, 1), mask=True, vec=2)
    commit()
    wait(1)
    barrier()
    a = load(s[0, 0 : 16, 0 : 64], tv=(128, 8):(1, 128))
    wait(0)
    barrier()
    b = load(s[1, 0 : 16, 0 : 64], tv=(128, 8):(1, 128))
    store(y[m0 : m0 + 16, n0 : n0 + 64], a + b, mask=True)
"""

BIGSMEM = """
kernel bigsmem(x: f32[N]) -> y: f32[N]:
    grid(cdiv(N, 16384))
    block(256)
    base = block_id.x * 16384
    s = shared(f32[16384])
    v = load(x[base : base + 16384], tv=(256, (4, 16)):(4, (1, 1024)), mask=True)
    store(s, v)
    barrier()
    w = load(s, tv=(256, 64):(64, 1))
    store(y[base : base + 16384], w * 3.0, mask=True)
"""

LOOPS = """
kernel loops(x: f32[M, N]) -> y: f32[M]:
    grid(M)
    block(32)
    row = block_id.x
    acc = zeros(f32[1, 32], tv=(32, 1):(1, 0))
    count = 0
    for c0 in range(0, N, 32, unroll=2):
        xs = load(x[row : row + 1, c0 : c0 + 32], tv=(32, 1):(1, 0), mask=True)
        if count % 2 == 0:
            acc = acc + xs
        else:
            acc = acc - xs
        count = count + 1
    s = reduce_sum(acc, axis=1, scope=warp, lanes=0b11111)
    store(y[row : row + 1], reshape(s, 1), where=lane_id == 0)
"""

INDEXING = """
kernel indexing(x: f32[N]) -> y: f32[N]:
    grid(cdiv(N, 96))
    block(32)
    base = block_id.x * 96
    j = (lane_id * 7) % 3 + min(lane_id, 5) - max(lane_id // 3, 2) + (lane_id >> 2) - (lane_id << 1) // 5
    k = j if lane_id < 9 else cdiv(lane_id, 7) ^ 6
    v = load(x[base : base + 96], tv=(32, 3):(3, 1), mask=True)
    store(y[base : base + 96], v * k + j, mask=True)
"""

KERNELS = {
    "saxpy": (SAXPY, {}, [{"N": 5000}, {"N": 1}, {"N": 4096}]),
    "lanes": (LANES, {}, [{"N": 1000}, {"N": 512}]),
    "casts": (CASTS, {}, [{"N": 3001}, {"N": 1024}]),
    "stage2d": (STAGE2D, {}, [{"M": 40, "N": 130}, {"M": 32, "N": 128}, {"M": 17, "N": 66}]),
    "bigsmem": (BIGSMEM, {}, [{"N": 40000}]),
    "loops": (LOOPS, {}, [{"M": 5, "N": 300}, {"M": 3, "N": 32}, {"M": 2, "N": 64}]),
    "indexing": (INDEXING, {}, [{"N": 500}]),
}
