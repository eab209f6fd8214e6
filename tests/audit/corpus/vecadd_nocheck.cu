// expect: bounds at line 8
// argus: block-dim 256
// argus: size a = n
// argus: size b = n
// argus: size c = n
__global__ void vecadd_nocheck(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  c[i] = a[i] + b[i];
}
