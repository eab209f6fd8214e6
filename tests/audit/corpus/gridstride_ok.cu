// expect: clean
// argus: block-dim 256
// argus: size a = n
// argus: size b = n
__global__ void gridstride(const float *a, float *b, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    b[i] = 2.0f * a[i];
}
