// expect: race at line 10
// A grid-stride loop that strides by blockDim.x only: blocks overlap, two blocks write one y[i].
// argus: block-dim 256
// argus: grid-dim 8
// argus: size x = n
// argus: size y = n
// argus: requires n <= 1048576
__global__ void copy_gs(const float *x, float *y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x)
    y[i] = x[i];
}
