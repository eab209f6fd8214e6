// expect: race at line 7
// argus: block-dim 256
// argus: size a = n
// argus: size b = n
__global__ void gridstride_bad(const float *a, float *b, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x)
    b[i] = 2.0f * a[i];
}
