// expect: race at line 10
// argus: block-dim 128
// argus: requires rows > 0 && cols > 0 && rows <= 32768 && cols <= 32768
// argus: size m = rows * cols
// argus: size out = rows
__global__ void rowsum_racy(const float *m, float *out, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < cols) {
    for (int r = 0; r < rows; ++r)
      out[r] += m[r * cols + c];
  }
}
