// expect: clean
// A grid-stride loop launched on a fixed grid, with the precondition that keeps i + stride from
// overflowing int (without it, n near INT_MAX wraps i around to negative indices).
// argus: block-dim 256
// argus: grid-dim 120
// argus: size a = n
// argus: size b = n
// argus: requires n <= 2147483647 - grid_dim.x * block_dim.x
__global__ void scale_gs_fixed(const float *a, float *b, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    b[i] = 2.0f * a[i];
}
