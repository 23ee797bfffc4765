package api

import "github.com/gin-gonic/gin"

// Routes lists the routes s serves: its engine's and, when it has
// them, the tracking routes'.
func Routes(s *Server) gin.RoutesInfo {
	routes := s.engine.Routes()
	if s.tracking != nil {
		routes = append(routes, s.tracking.engine.Routes()...)
	}
	return routes
}

// OpenAPIJSON is the document GET /openapi.json serves.
func OpenAPIJSON() ([]byte, error) {
	d, err := openAPIDoc()
	return d.body, err
}
