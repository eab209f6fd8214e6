// expect: bounds at line 9
// argus: block-dim 256
// argus: size a = n
// argus: size b = n
// argus: size c = n
__global__ void vecadd_obo(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n)
    c[i] = a[i] + b[i];
}
