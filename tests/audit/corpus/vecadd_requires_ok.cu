// expect: clean
// argus: block-dim 256
// argus: requires n == grid_dim.x * block_dim.x
// argus: size a = n
// argus: size c = n
__global__ void vecadd_exact(const float *a, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  c[i] = 2.0f * a[i];
}
