// expect: bounds at line 10
// A grid-stride loop whose test is `i <= n`: the thread with i == n reads and writes one past the end.
// argus: block-dim 256
// argus: grid-dim 120
// argus: size x = n
// argus: size y = n
// argus: requires n <= 2147483647 - grid_dim.x * block_dim.x
__global__ void scale_gs(const float *x, float *y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += gridDim.x * blockDim.x)
    y[i] = 2.0f * x[i];
}
