package bench

// Build against build on the router: with --compare-bin, each rttscope
// mode of the monitor study also runs with another rttscope binary (an
// earlier build), interleaved with this one's in every round, and the
// study derives this build's figures as ratios to that build's. It is how
// a change to the data path is judged on the router's traffic (1,000 and
// 10,000 flows, the UDP flood), where `bench --only steps --compare-bin`
// judges it on one TCP bulk transfer.

// prevConfig names the configuration of mode run by the other build.
func prevConfig(mode string) string { return modeConfig(mode) + "-prev" }

// againstPrevMetrics are the figures compared: the programs' cost, the
// share of the busy CPU and what the router still forwards.
var againstPrevMetrics = []string{MetricBPFNetNsPerPkt, MetricToolCPUShareNet, MetricFwdPPS}

// addAgainstPrev derives, per case, mode and metric, this build's mean
// over the other build's (METRIC_vs_prev, with its bootstrap interval).
func addAgainstPrev(res *Result, modes []string) {
	for _, key := range res.caseKeys() {
		if key.group != GroupMonitor {
			continue
		}
		for _, mode := range modes {
			for _, metric := range againstPrevMetrics {
				cur := res.Lookup(seriesID(key.group, key.cas, modeConfig(mode), "", metric))
				prev := res.Lookup(seriesID(key.group, key.cas, prevConfig(mode), "", metric))
				if cur == nil || prev == nil || cur.Summary.N == 0 || prev.Summary.N == 0 {
					continue
				}
				if d, ok := ratioOfSeries(cur, prev, metric+"_vs_prev", "mean "+metric+" / the other build's (--compare-bin)"); ok {
					res.Derived = append(res.Derived, d)
				}
			}
		}
	}
}
