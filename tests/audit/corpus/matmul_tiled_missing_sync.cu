// expect: race at line 17
// expect: race at line 18
// argus: block-dim 16,16
// argus: grid-dim 1..128,1..128
// argus: requires n > 0 && n <= 2048 && n % 16 == 0
// argus: requires grid_dim.x * 16 == n && grid_dim.y * 16 == n
// argus: size A = n * n
// argus: size B = n * n
// argus: size C = n * n
__global__ void matmul_racy(const float *A, const float *B, float *C, int n) {
  __shared__ float As[16][16];
  __shared__ float Bs[16][16];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += 16) {
    As[ty][tx] = A[row * n + k0 + tx];
    Bs[ty][tx] = B[(k0 + ty) * n + col];
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc += As[ty][k] * Bs[k][tx];
  }
  C[row * n + col] = acc;
}
