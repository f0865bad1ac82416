// Package platform is the engine behind package dlc's public surface: the
// cache of the store, the labels that index it, name claims, the queues
// and admission, the quota write path, one reconciler per kind of stored
// object, and the metrics. Package dlc's services check nothing
// themselves and delegate here; nothing outside the module imports it.
package platform
