// expect: bounds at line 9
// argus: block-dim 16,16
// argus: requires rows > 0 && cols > 0 && rows <= 4096 && cols <= 4096
// argus: size in = rows * cols
// argus: size out = rows * cols
__global__ void transpose_swapped(const float *in, float *out, int rows, int cols) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < rows && y < cols) out[x * rows + y] = in[y * cols + x];
}
