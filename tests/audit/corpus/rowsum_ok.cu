// expect: clean
// argus: block-dim 128
// argus: requires rows > 0 && cols > 0 && rows <= 32768 && cols <= 32768
// argus: size m = rows * cols
// argus: size out = rows
__global__ void rowsum(const float *m, float *out, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    float acc = 0.0f;
    for (int c = 0; c < cols; ++c) acc += m[r * cols + c];
    out[r] = acc;
  }
}
