// expect: clean
// argus: block-dim 16,16
// argus: requires w > 2 && h > 2 && w <= 4096 && h <= 4096
// argus: size in = w * h
// argus: size out = w * h
__global__ void stencil2d(const float *in, float *out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= 1 && y >= 1 && x < w - 1 && y < h - 1)
    out[y * w + x] = in[y * w + x - 1] + in[y * w + x + 1] + in[(y - 1) * w + x] + in[(y + 1) * w + x];
}
