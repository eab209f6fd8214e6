// expect: clean
// argus: block-dim 256
// argus: size a = n
// argus: size b = n
// argus: size c = n
__global__ void vecadd(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
