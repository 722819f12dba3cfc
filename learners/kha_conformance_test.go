package learners_test

import (
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

func TestKHAConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  learners.Config
	}{
		{"rbf_d3_k2_b40", learners.Config{Learner: learners.KindKHA, Dim: 3, Components: 2, Budget: 40, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}, Seed: 5}},
		{"poly_d2_k3_b30_r1", learners.Config{Learner: learners.KindKHA, Dim: 2, Components: 3, Budget: 30, Refresh: 1, Kernel: learners.Kernel{Name: learners.KernelPoly, Gamma: 1, Coef0: 1, Degree: 2}, Jitter: 1e-8}},
		{"linear_d1_k1_b8", learners.Config{Learner: learners.KindKHA, Dim: 1, Components: 1, Budget: 8, Kernel: learners.Kernel{Name: learners.KernelLinear}}},
		{"laplacian_d4_k4_b4", learners.Config{Learner: learners.KindKHA, Dim: 4, Components: 4, Budget: 4, Kernel: learners.Kernel{Name: learners.KernelLaplacian, Gamma: 0.5}}},
		// Kashima's other rules (Config.Rule) and the β of eq. (12).
		{"apex_rbf_d3_k3_b40", learners.Config{Learner: learners.KindKHA, Rule: learners.RuleAPEX, Dim: 3, Components: 3, Budget: 40, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}, Seed: 5}},
		{"apex_rbf_d3_k4_b40_r4", learners.Config{Learner: learners.KindKHA, Rule: learners.RuleAPEX, Dim: 3, Components: 4, Budget: 40, Refresh: 4, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}, Seed: 5}},
		{"apex_poly_d2_k3_b30_r1", learners.Config{Learner: learners.KindKHA, Rule: learners.RuleAPEX, Dim: 2, Components: 3, Budget: 30, Refresh: 1, Kernel: learners.Kernel{Name: learners.KernelPoly, Gamma: 1, Coef0: 1, Degree: 2}, Jitter: 1e-8}},
		{"oja_rbf_d3_k2_b40", learners.Config{Learner: learners.KindKHA, Rule: learners.RuleOja, Dim: 3, Components: 2, Budget: 40, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}, Seed: 5}},
		{"oja_linear_d1_k1_b8", learners.Config{Learner: learners.KindKHA, Rule: learners.RuleOja, Dim: 1, Components: 1, Budget: 8, Kernel: learners.Kernel{Name: learners.KernelLinear}}},
		// Gain smd (stochastic meta-descent, Config.Gain).
		{"smd_rbf_d3_k3_b40", learners.Config{Learner: learners.KindKHA, Gain: learners.GainSMD, Dim: 3, Components: 3, Budget: 40, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}, Seed: 5}},
		{"smd_poly_d2_k3_b30_r1", learners.Config{Learner: learners.KindKHA, Gain: learners.GainSMD, Dim: 2, Components: 3, Budget: 30, Refresh: 1, Kernel: learners.Kernel{Name: learners.KernelPoly, Gamma: 1, Coef0: 1, Degree: 2}, Jitter: 1e-8}},
		{"smd_linear_d1_k1_b8", learners.Config{Learner: learners.KindKHA, Gain: learners.GainSMD, Dim: 1, Components: 1, Budget: 8, Kernel: learners.Kernel{Name: learners.KernelLinear}}},
		// Dictionary kmeans (Config.Dictionary), alone and with gain smd.
		{"kmeans_rbf_d3_k2_b20", learners.Config{Learner: learners.KindKHA, Dictionary: learners.DictKMeans, Dim: 3, Components: 2, Budget: 20, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}, Seed: 5}},
		{"kmeans_smd_rbf_d3_k3_b20", learners.Config{Learner: learners.KindKHA, Dictionary: learners.DictKMeans, Gain: learners.GainSMD, Dim: 3, Components: 3, Budget: 20, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}, Seed: 5}},
		{"kmeans_poly_d2_k3_b30_r1", learners.Config{Learner: learners.KindKHA, Dictionary: learners.DictKMeans, Dim: 2, Components: 3, Budget: 30, Refresh: 1, Kernel: learners.Kernel{Name: learners.KernelPoly, Gamma: 1, Coef0: 1, Degree: 2}, Jitter: 1e-8}},
		{"gha_beta2_rbf_d3_k3_b40", learners.Config{Learner: learners.KindKHA, Beta: 2, Dim: 3, Components: 3, Budget: 40, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}, Seed: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newL := func() learners.Learner {
				l, err := learners.New(tc.cfg)
				if err != nil {
					t.Fatalf("New(%+v): %v", tc.cfg, err)
				}
				return l
			}
			opts := learnertest.Options{Dim: tc.cfg.Dim, Budget: tc.cfg.Budget, Seed: 11}
			if tc.cfg.Gain == learners.GainSMD {
				// The Rayleigh–Ritz step's row moment came after gain smd.
				opts.Optional = []string{"row_moment", "moment_count"}
			}
			learnertest.Check(t, newL, opts)
		})
	}
}
